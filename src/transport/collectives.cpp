#include "transport/collectives.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/reduce.h"

namespace ccl::transport {

namespace {

Task nothing() { co_return; }

char* at(void* p, size_t off) { return static_cast<char*>(p) + off; }
const char* at(const void* p, size_t off) { return static_cast<const char*>(p) + off; }

// out = a op b, with the lower member's data first so that every member computes the same bits.
void combine(void* out, const void* lower, const void* higher, size_t count, ccl_datatype_t dtype,
             ccl_reduction_t op) {
    const void* srcs[2] = {lower, higher};
    ccl::reduce(out, srcs, 2, count, dtype, op, 1);
}

Task allreduce_doubling(Fabric& f, const Group& g, void* buf, size_t count, ccl_datatype_t dtype,
                        ccl_reduction_t op) {
    const int n = g.size(), me = g.me;
    const size_t bytes = count * dtype_size(dtype);
    Fabric::Scratch tmp = f.scratch(bytes);
    int p = 1;
    while (p * 2 <= n) p *= 2;
    const int rem = n - p;
    // The first 2*rem members pair up: odd ones hand their data to the even one and wait.
    int vme = me - rem;
    if (me < 2 * rem) {
        if (me % 2) {
            auto s = f.post_send(g.ranks[size_t(me - 1)], Channel::coll, buf, bytes);
            co_await f.done(s);
            auto r = f.post_recv(g.ranks[size_t(me - 1)], Channel::coll, buf, bytes);
            co_await f.done(r);
            co_return;
        }
        auto r = f.post_recv(g.ranks[size_t(me + 1)], Channel::coll, tmp.data(), bytes);
        co_await f.done(r);
        combine(buf, buf, tmp.data(), count, dtype, op);
        vme = me / 2;
    }
    for (int mask = 1; mask < p; mask <<= 1) {
        const int vpeer = vme ^ mask;
        const int peer = vpeer < rem ? vpeer * 2 : vpeer + rem;
        auto r = f.post_recv(g.ranks[size_t(peer)], Channel::coll, tmp.data(), bytes);
        auto s = f.post_send(g.ranks[size_t(peer)], Channel::coll, buf, bytes);
        co_await f.done(r);
        co_await f.done(s);
        if (vpeer < vme)
            combine(buf, tmp.data(), buf, count, dtype, op);
        else
            combine(buf, buf, tmp.data(), count, dtype, op);
    }
    if (me < 2 * rem) {
        auto s = f.post_send(g.ranks[size_t(me + 1)], Channel::coll, buf, bytes);
        co_await f.done(s);
    }
}

// How many parts a ring cuts a block of `bytes` into. Eager parts where that makes at most 64:
// a rendezvous costs a round trip per message, and over tcp;ofi_rxm its data waits for the sender
// to drive progress. Larger blocks in parts of the fabric's largest message (hundreds of eager
// parts cost more than they pipeline; docs/tuning.md, "Constants of the data path").
size_t ring_parts(const Fabric& f, size_t bytes) {
    constexpr size_t kMaxEagerParts = 64;
    const size_t eager = f.eager_max();
    if (eager && bytes <= kMaxEagerParts * eager) return (bytes + eager - 1) / eager;
    return (bytes + Fabric::kMaxMessage - 1) / Fabric::kMaxMessage;
}

// Ring reduce-scatter + all-gather in 2(n-1) steps; step t sends the block step t-1 received
// (reduced, during the reduce-scatter). Pipelined in parts: part k of a block goes on to the next
// member as soon as it is reduced (or, in the all-gather, received), so the reduction, the
// receive and the send overlap instead of following each other step by step. An all-gather part
// may land where this member sent from before its send reported completion: the data for it
// exists only after the next member received that send.
Task allreduce_ring(Fabric& f, const Group& g, void* buf, size_t count, ccl_datatype_t dtype,
                    ccl_reduction_t op) {
    const int n = g.size(), me = g.me, steps = 2 * (n - 1);
    const size_t esize = dtype_size(dtype);
    const int next = g.ranks[size_t((me + 1) % n)], prev = g.ranks[size_t((me + n - 1) % n)];
    auto first = [&](int b) { return count * size_t(b) / size_t(n); };
    const size_t most = count / size_t(n) + 1;  // the longest block, in elements
    // Every block in the same number of parts, none empty (a block has at least one element).
    const size_t parts = std::min(ring_parts(f, most * esize), count / size_t(n));
    auto part = [&](int b, size_t k) {  // {offset in bytes, bytes}
        const size_t len = first(b + 1) - first(b);
        const size_t lo = len * k / parts, hi = len * (k + 1) / parts;
        return std::pair{(first(b) + lo) * esize, (hi - lo) * esize};
    };
    auto sent = [&](int t) {
        return t < n - 1 ? (me - t + n) % n : (me + 1 - (t - n + 1) + n) % n;
    };
    auto received = [&](int t) { return sent(t + 1); };
    // Reduce-scatter steps receive into a temporary, alternating between two (the step after
    // next reuses a part once it is reduced); all-gather steps straight into place. Part k of
    // every block has the same room there (blocks differ in length by one element, so their parts'
    // bounds differ).
    const size_t room = (most / parts + 1) * esize;
    Fabric::Scratch tmp = f.scratch(2 * parts * room);
    auto in_tmp = [&](int t, size_t k) { return tmp.data() + (size_t(t % 2) * parts + k) * room; };
    auto post_recv = [&](int t, size_t k) {
        auto [off, bytes] = part(received(t), k);
        return f.post_recv(prev, Channel::coll, t < n - 1 ? in_tmp(t, k) : at(buf, off), bytes);
    };
    auto post_send = [&](int t, size_t k) {
        auto [off, bytes] = part(sent(t), k);
        return f.post_send(next, Channel::coll, at(buf, off), bytes);
    };
    std::vector<Fabric::OpRef> sends, recvs[2];
    sends.reserve(size_t(steps) * parts);
    for (size_t k = 0; k < parts; ++k) sends.push_back(post_send(0, k));
    for (int t = 0; t < std::min(steps, 2); ++t)
        for (size_t k = 0; k < parts; ++k) recvs[t].push_back(post_recv(t, k));
    for (int t = 0; t < steps; ++t)
        for (size_t k = 0; k < parts; ++k) {
            Fabric::OpRef& r = recvs[t % 2][k];
            co_await f.done(r);
            if (t < n - 1) {
                auto [off, bytes] = part(received(t), k);
                combine(at(buf, off), in_tmp(t, k), at(buf, off), bytes / esize, dtype, op);
            }
            if (t + 1 < steps) sends.push_back(post_send(t + 1, k));
            if (t + 2 < steps) r = post_recv(t + 2, k);
        }
    for (auto& s : sends) co_await f.done(s);
}

}  // namespace

Task allreduce(Fabric& f, const Group& g, void* buf, size_t count, ccl_datatype_t dtype,
               ccl_reduction_t op) {
    if (g.size() == 1 || count == 0) return nothing();
    if (count * dtype_size(dtype) >= kRingMinBytes && count >= size_t(g.size()))
        return allreduce_ring(f, g, buf, count, dtype, op);
    return allreduce_doubling(f, g, buf, count, dtype, op);
}

Task reduce(Fabric& f, const Group& g, void* buf, size_t count, ccl_datatype_t dtype,
            ccl_reduction_t op, int root) {
    const int n = g.size(), vme = (g.me - root + n) % n;
    const size_t bytes = count * dtype_size(dtype);
    // A node that receives from a child needs room for it (the first round tells).
    Fabric::Scratch tmp = f.scratch(vme % 2 == 0 && vme + 1 < n ? bytes : 0);
    for (int mask = 1; mask < n; mask <<= 1) {
        if (vme & mask) {  // hand the partial result to the parent and stop
            int parent = ((vme & ~mask) + root) % n;
            auto s = f.post_send(g.ranks[size_t(parent)], Channel::coll, buf, bytes);
            co_await f.done(s);
            co_return;
        }
        if (vme + mask < n) {
            int child = (vme + mask + root) % n;
            auto r = f.post_recv(g.ranks[size_t(child)], Channel::coll, tmp.data(), bytes);
            co_await f.done(r);
            combine(buf, buf, tmp.data(), count, dtype, op);
        }
    }
}

Task broadcast(Fabric& f, const Group& g, void* buf, size_t bytes, int root) {
    const int n = g.size(), vme = (g.me - root + n) % n;
    int mask = 1;
    for (; mask < n; mask <<= 1)
        if (vme & mask) {
            int parent = ((vme - mask) + root) % n;
            auto r = f.post_recv(g.ranks[size_t(parent)], Channel::coll, buf, bytes);
            co_await f.done(r);
            break;
        }
    std::vector<Fabric::OpRef> sends;
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (vme + mask < n)
            sends.push_back(
                f.post_send(g.ranks[size_t((vme + mask + root) % n)], Channel::coll, buf, bytes));
    for (auto& s : sends) co_await f.done(s);
}

Task allgatherv(Fabric& f, const Group& g, void* buf, const std::vector<size_t>& off) {
    const int n = g.size(), me = g.me;
    const int next = g.ranks[size_t((me + 1) % n)], prev = g.ranks[size_t((me + n - 1) % n)];
    for (int s = 0; s < n - 1; ++s) {
        const int sb = (me - s + n) % n, rb = (me - s - 1 + 2 * n) % n;
        auto r = f.post_recv(prev, Channel::coll, at(buf, off[size_t(rb)]),
                             off[size_t(rb) + 1] - off[size_t(rb)]);
        auto w = f.post_send(next, Channel::coll, at(buf, off[size_t(sb)]),
                             off[size_t(sb) + 1] - off[size_t(sb)]);
        co_await f.done(r);
        co_await f.done(w);
    }
}

Task reduce_scatter(Fabric& f, const Group& g, const void* send, const std::vector<size_t>& off,
                    void* recv, ccl_datatype_t dtype, ccl_reduction_t op) {
    const int n = g.size(), me = g.me;
    const size_t mine = off[size_t(me) + 1] - off[size_t(me)];
    Fabric::Scratch in = f.scratch(size_t(n) * mine);
    std::vector<Fabric::OpRef> ops;
    for (int k = 0; k < n; ++k)
        if (k != me)
            ops.push_back(
                f.post_recv(g.ranks[size_t(k)], Channel::coll, in.data() + size_t(k) * mine, mine));
    for (int s = 1; s < n; ++s) {
        const int k = (me + s) % n;
        ops.push_back(f.post_send(g.ranks[size_t(k)], Channel::coll, at(send, off[size_t(k)]),
                                  off[size_t(k) + 1] - off[size_t(k)]));
    }
    for (auto& o : ops) co_await f.done(o);
    // In member order, so that the sum's bits do not depend on who computes it.
    std::vector<const void*> srcs;
    for (int k = 0; k < n; ++k)
        srcs.push_back(k == me ? at(send, off[size_t(me)]) : in.data() + size_t(k) * mine);
    if (mine) ccl::reduce(recv, srcs.data(), n, mine / dtype_size(dtype), dtype, op, 1);
}

Task barrier(Fabric& f, const Group& g) {
    const int n = g.size(), me = g.me;
    char token = 0, got = 0;
    for (int k = 1; k < n; k <<= 1) {
        auto r = f.post_recv(g.ranks[size_t((me - k + n) % n)], Channel::coll, &got, 1);
        auto s = f.post_send(g.ranks[size_t((me + k) % n)], Channel::coll, &token, 1);
        co_await f.done(r);
        co_await f.done(s);
    }
}

}  // namespace ccl::transport

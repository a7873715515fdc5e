#include "transport/collectives.h"

#include <cstring>

#include "core/reduce.h"

namespace ccl::transport {

namespace {

Task nothing() { co_return; }

char* at(void* p, size_t off) { return static_cast<char*>(p) + off; }

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

Task allreduce_ring(Fabric& f, const Group& g, void* buf, size_t count, ccl_datatype_t dtype,
                    ccl_reduction_t op) {
    const int n = g.size(), me = g.me;
    const size_t esize = dtype_size(dtype);
    const int next = g.ranks[size_t((me + 1) % n)], prev = g.ranks[size_t((me + n - 1) % n)];
    auto first = [&](int b) { return count * size_t(b) / size_t(n); };
    auto len = [&](int b) { return first(b + 1) - first(b); };
    Fabric::Scratch tmp = f.scratch((count / size_t(n) + 1) * esize);
    // Reduce-scatter: after n-1 steps member me holds the sum of block (me + 1) % n.
    for (int s = 0; s < n - 1; ++s) {
        const int sb = (me - s + n) % n, rb = (me - s - 1 + 2 * n) % n;
        auto r = f.post_recv(prev, Channel::coll, tmp.data(), len(rb) * esize);
        auto w = f.post_send(next, Channel::coll, at(buf, first(sb) * esize), len(sb) * esize);
        co_await f.done(r);
        co_await f.done(w);
        void* mine = at(buf, first(rb) * esize);
        combine(mine, tmp.data(), mine, len(rb), dtype, op);
    }
    // All-gather the reduced blocks.
    for (int s = 0; s < n - 1; ++s) {
        const int sb = (me + 1 - s + n) % n, rb = (me - s + n) % n;
        auto r = f.post_recv(prev, Channel::coll, at(buf, first(rb) * esize), len(rb) * esize);
        auto w = f.post_send(next, Channel::coll, at(buf, first(sb) * esize), len(sb) * esize);
        co_await f.done(r);
        co_await f.done(w);
    }
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

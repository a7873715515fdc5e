#include "core/device_coll.h"

#include <chrono>
#include <numeric>
#include <optional>

#include "core/comm.h"
#include "core/error.h"
#include "core/reduce.h"

namespace ccl::ze {

Extents extents(const CollSignature& sig, const Buffers& bufs, int rank, int size) {
    const size_t es = dtype_size(sig.dtype), n = size_t(size), c = sig.count * es;
    switch (sig.coll) {
        case CollType::allreduce:
        case CollType::broadcast: return {c, c};
        case CollType::reduce: return {c, rank == sig.root ? c : 0};
        case CollType::allgather: return {c, n * c};
        case CollType::allgatherv: return {bufs.counts[size_t(rank)] * es, c};  // count: the total
        case CollType::reduce_scatter: return {n * c, c};
        case CollType::alltoall: return {n * c, n * c};
        case CollType::alltoallv: {
            auto mid = bufs.counts.begin() + std::ptrdiff_t(n);
            return {std::accumulate(bufs.counts.begin(), mid, size_t(0)) * es,
                    std::accumulate(mid, bufs.counts.end(), size_t(0)) * es};
        }
        case CollType::send: return {c, 0};
        case CollType::recv: return {0, c};
        case CollType::barrier: return {0, 0};
    }
    return {0, 0};
}

namespace {

struct Region {
    const char* p = nullptr;
    size_t bytes = 0;
    MemInfo info;
    bool device() const { return bytes > 0 && info.needs_copy(); }
    bool contains(const Region& o) const { return o.p >= p && o.p + o.bytes <= p + bytes; }
    bool overlaps(const Region& o) const { return p < o.p + o.bytes && o.p < p + bytes; }
};

// One staged call: host copies of its device buffers, and the copies in and out.
struct Staging {
    Buffers host;  // what the host schedule runs on
    std::optional<HostBuffer> send_buf, recv_buf;
    std::vector<CopyOp> in, out;
    Copier* copy_in = nullptr;
    Copier* copy_out = nullptr;
    double timeout_s = 0;
};

std::chrono::steady_clock::time_point deadline(double seconds) {
    return std::chrono::steady_clock::now() +
           std::chrono::duration_cast<std::chrono::steady_clock::duration>(
               std::chrono::duration<double>(seconds));
}

// The copies run inside the call's execution (after the calls issued before it on the
// communicator), on whatever thread runs it. They wait for the copy engine without yielding to
// other work: a copy is short next to the collective.
Task copy_step(std::shared_ptr<Staging> st, bool in) {
    if (in)
        st->copy_in->copy(st->in, deadline(st->timeout_s));
    else
        st->copy_out->copy(st->out, deadline(st->timeout_s));
    co_return;
}

}  // namespace

bool has_device_buffer(const CollSignature& sig, const Buffers& bufs, int rank, int size) {
    Extents ext = extents(sig, bufs, rank, size);
    return (ext.send && classify(bufs.send).needs_copy()) ||
           (ext.recv && classify(bufs.recv).needs_copy());
}

std::shared_ptr<const Schedule> device_schedule(Communicator& comm,
                                                const std::shared_ptr<const Schedule>& host,
                                                const Buffers& bufs, Copier* stream) {
    const Extents ext = extents(host->sig, bufs, comm.rank(), comm.size());
    if (!enabled()) {
        // XPU off with a loader in the process: refuse memory host code cannot read.
        check_readable(bufs.send, ext.send, "send buffer");
        check_readable(bufs.recv, ext.recv, "recv buffer");
        if (stream) require_enabled("a stream");
        return nullptr;
    }
    Region s{static_cast<const char*>(bufs.send), ext.send, classify(bufs.send)};
    Region r{static_cast<const char*>(bufs.recv), ext.recv, classify(bufs.recv)};
    if (!s.device() && !r.device() && !stream) return nullptr;

    auto st = std::make_shared<Staging>();
    st->host = bufs;
    st->timeout_s = comm.config().timeout_s;
    if (s.device() && r.device() && s.overlaps(r)) {
        // In place: stage the buffer that holds the other; its contents are input.
        const bool recv_outer = r.contains(s);
        const Region& outer = recv_outer ? r : s;
        const Region& inner = recv_outer ? s : r;
        if (!outer.contains(inner))
            throw Error(CCL_ERROR_INVALID_ARGUMENT, "device send and recv buffers overlap");
        st->recv_buf.emplace(outer.bytes);
        char* h = st->recv_buf->data();
        st->in.push_back({h, outer.p, outer.bytes});
        char* inner_h = h + (inner.p - outer.p);
        st->host.send = recv_outer ? inner_h : h;
        st->host.recv = recv_outer ? h : inner_h;
        // Out goes the recv region: all of it, or its part of the send buffer.
        st->out.push_back({const_cast<char*>(r.p), static_cast<char*>(st->host.recv), r.bytes});
    } else {
        if (s.device()) {
            st->send_buf.emplace(s.bytes);
            st->in.push_back({st->send_buf->data(), s.p, s.bytes});
            st->host.send = st->send_buf->data();
        }
        if (r.device()) {
            // Out of place: every collective writes all of its recv extent, so nothing comes in.
            st->recv_buf.emplace(r.bytes);
            st->host.recv = st->recv_buf->data();
            st->out.push_back({const_cast<char*>(r.p), st->recv_buf->data(), r.bytes});
        }
    }
    auto device_of = [&](const Region& reg) { return reg.device() ? reg.info.device : nullptr; };
    if (stream) {
        st->copy_in = st->copy_out = stream;
    } else {
        void* in_dev = device_of(s) ? device_of(s) : device_of(r);
        void* out_dev = device_of(r);
        if (!st->in.empty()) st->copy_in = &copier_for(in_dev);
        if (!st->out.empty()) st->copy_out = &copier_for(out_dev);
    }

    auto wrapped = std::make_shared<Schedule>();
    wrapped->sig = host->sig;
    // With a stream the copy in also waits for the user's earlier work on it (even with no copy).
    if (st->copy_in)
        wrapped->steps.push_back(
            {"ze/stage_in", [st](const Buffers&) { return copy_step(st, true); }});
    for (const Step& step : host->steps)
        wrapped->steps.push_back(
            {step.name, [st, start = step.start](const Buffers&) { return start(st->host); }});
    if (st->copy_out)
        wrapped->steps.push_back(
            {"ze/stage_out", [st](const Buffers&) { return copy_step(st, false); }});
    return wrapped;
}

}  // namespace ccl::ze

#include "core/device_coll.h"

#include <chrono>
#include <numeric>
#include <optional>

#include "base/error.h"
#include "base/log.h"
#include "base/reduce.h"
#include "core/comm.h"

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

// Forwards an inner task's wait to the coroutine that drives it.
struct Delegate {
    Waiter* w;
    bool await_ready() { return w->ready(); }
    void await_suspend(Task::Handle h) { h.promise().waiting = w; }
    void await_resume() {}
};

// Runs steps to the end inside another step, waiting as they wait.
Task run_steps(std::vector<Step> steps, Buffers bufs) {  // by value: kept in the frame
    for (const Step& step : steps) {
        Task t = step.start(bufs);
        for (;;) {
            t.resume();
            if (t.done()) break;
            co_await Delegate{t.waiting()};
        }
    }
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

// ---- device to device through IPC handles (CCL_ZE_IPC) ----

// What each rank tells the others before an IPC collective: whether it can take part (its
// buffers are device memory), and how to open the buffer the others read.
struct IpcSlot {
    uint32_t ok = 0;
    // The call (CollSignature::round), and how many bytes of its buffer peers may read (an
    // allgatherv's own block): ranks that disagree fail instead of reading past buffers.
    uint64_t what = 0, count = 0, bytes = 0;
    IpcRecord rec;
};

struct IpcCall {
    CollSignature sig;
    int rank = 0, size = 0;
    Buffers user;                // the call's own buffers
    IpcSlot mine;                // sent
    std::vector<IpcSlot> all;    // received
    std::vector<Step> exchange;  // the host allgather of the slots
    std::vector<Step> barrier;   // after the copies: nobody's buffer is read any more
    std::vector<Step> staged;    // the staged schedule's steps, when some rank cannot
    void* device = nullptr;      // this rank's device, for copies and opening handles
    double timeout_s = 0;
};

bool ipc_collective(const CollSignature& sig) {
    return (sig.coll == CollType::broadcast || sig.coll == CollType::allgather ||
            sig.coll == CollType::allgatherv || sig.coll == CollType::alltoall) &&
           sig.count > 0;
}

// This rank's copies: from the peers' buffers (opened through their handles) into its recv.
std::vector<CopyOp> ipc_copies(const IpcCall& c) {
    const size_t es = dtype_size(c.sig.dtype), n = size_t(c.size), r = size_t(c.rank);
    // Bytes [at, at + len) of peer q's buffer, within what it declared.
    auto peer = [&](size_t q, size_t at, size_t len) {
        if (at > c.all[q].bytes || len > c.all[q].bytes - at)
            throw Error(CCL_ERROR_INVALID_USAGE,
                        "ranks disagree on a call: rank " + std::to_string(c.rank) +
                            " would read " + std::to_string(len) + " bytes at " +
                            std::to_string(at) + " of rank " + std::to_string(q) +
                            "'s buffer, which it declared " + std::to_string(c.all[q].bytes) +
                            " bytes long");
        return static_cast<char*>(ipc_open(c.all[q].rec, c.device)) + at;
    };
    char* recv = static_cast<char*>(c.user.recv);
    const char* send = static_cast<const char*>(c.user.send);
    std::vector<CopyOp> ops;
    switch (c.sig.coll) {
        case CollType::broadcast:
            if (c.rank != c.sig.root)
                ops.push_back(
                    {recv, peer(size_t(c.sig.root), 0, c.sig.count * es), c.sig.count * es});
            break;
        case CollType::allgather:
        case CollType::allgatherv: {
            size_t off = 0;
            for (size_t q = 0; q < n; ++q) {
                size_t bytes =
                    (c.sig.coll == CollType::allgather ? c.sig.count : c.user.counts[q]) * es;
                if (q != r && bytes != c.all[q].bytes)
                    throw Error(CCL_ERROR_INVALID_USAGE,
                                "allgatherv counts disagree: rank " + std::to_string(q) +
                                    " contributes " + std::to_string(c.all[q].bytes / es) +
                                    " elements, where rank " + std::to_string(c.rank) +
                                    "'s recvcounts[" + std::to_string(q) + "] is " +
                                    std::to_string(bytes / es));
                if (bytes && q != r) ops.push_back({recv + off, peer(q, 0, bytes), bytes});
                if (bytes && q == r && send != recv + off) ops.push_back({recv + off, send, bytes});
                off += bytes;
            }
            break;
        }
        case CollType::alltoall: {
            const size_t bytes = c.sig.count * es;
            for (size_t q = 0; q < n; ++q)
                ops.push_back({recv + q * bytes,
                               q == r ? send + r * bytes : peer(q, r * bytes, bytes), bytes});
            break;
        }
        default: break;
    }
    return ops;
}

// Every rank learns whether all can copy device to device; all do, or all run the staged
// schedule. After the copies a barrier: a rank's buffer may change once it returns.
Task ipc_step(std::shared_ptr<IpcCall> c) {
    bool all_ok = true;
    for (const IpcSlot& s : c->all) {
        all_ok = all_ok && s.ok;
        if (s.what != c->mine.what || s.count != c->mine.count)
            throw Error(CCL_ERROR_INVALID_USAGE, "ranks disagree on a call: this rank called " +
                                                     c->sig.describe() +
                                                     ", another rank something else");
    }
    if (!all_ok) {
        Task t = run_steps(c->staged, c->user);
        for (;;) {
            t.resume();
            if (t.done()) co_return;
            co_await Delegate{t.waiting()};
        }
    }
    copier_for(c->device).copy(ipc_copies(*c), deadline(c->timeout_s));
    Task t = run_steps(c->barrier, c->user);
    for (;;) {
        t.resume();
        if (t.done()) co_return;
        co_await Delegate{t.waiting()};
    }
}

std::shared_ptr<const Schedule> ipc_schedule(Communicator& comm, const CollSignature& sig,
                                             const Buffers& bufs, const Region& s, const Region& r,
                                             std::shared_ptr<const Schedule> staged) {
    auto c = std::make_shared<IpcCall>();
    c->sig = sig;
    c->rank = comm.rank();
    c->size = comm.size();
    c->user = bufs;
    c->timeout_s = comm.config().timeout_s;
    c->all.resize(size_t(comm.size()));
    c->staged = staged->steps;
    // What peers read: the root's buffer, or every rank's send buffer.
    const Region& src = sig.coll == CollType::broadcast ? r : s;
    bool ok = r.bytes == 0 || r.device();
    ok = ok && (src.bytes == 0 || src.device());
    // In-place alltoall would overwrite what peers still read.
    if (sig.coll == CollType::alltoall && s.overlaps(r)) ok = false;
    if (ok) {
        c->device = r.bytes ? r.info.device : src.info.device;
        if (!c->device) ok = false;
    }
    if (ok && src.bytes) c->mine.rec = ipc_record(src.p, src.info);
    c->mine.ok = ok;
    const shm::Signature round = sig.round(Algo::device_ipc);
    c->mine.what = round.what();
    c->mine.count = round.count();
    c->mine.bytes = src.bytes;
    c->exchange =
        comm.schedule_for({CollType::allgather, sizeof(IpcSlot), CCL_UINT8, CCL_SUM, 0}, {})->steps;
    c->barrier = comm.schedule_for(CollSignature{}, {})->steps;
    auto sched = std::make_shared<Schedule>();
    sched->sig = sig;
    sched->steps.push_back({"ze/ipc_exchange", [c](const Buffers&) {
                                return run_steps(c->exchange, Buffers{&c->mine, c->all.data(), {}});
                            }});
    sched->steps.push_back({"ze/ipc_copy", [c](const Buffers&) { return ipc_step(c); }});
    return sched;
}

// ---- pipelined staging of large allreduces and broadcasts ----

// The call runs as a sequence of chunk-sized host collectives; the copy engine brings chunk k+1
// in and takes chunk k-1 out while the host works on chunk k.
struct Pipeline {
    size_t count = 0, chunk = 0, es = 0, nchunks = 0;  // elements
    std::vector<Step> full, last;  // the host steps of a full chunk and of the last one
    const char* host_send = nullptr;
    char* host_recv = nullptr;
    std::optional<HostBuffer> send_buf, recv_buf;
    const char* dev_send = nullptr;  // copied in from, chunk by chunk (nullptr: nothing to copy)
    char* dev_recv = nullptr;        // copied out to
    Copier* copy_in = nullptr;
    Copier* copy_out = nullptr;
    std::optional<CopyEvents> in_done, out_done;  // per chunk, when the copier can append
    double timeout_s = 0;
};

bool pipelined(const Communicator& comm, const CollSignature& sig) {
    return (sig.coll == CollType::allreduce || sig.coll == CollType::broadcast) &&
           comm.size() > 1 && sig.count * dtype_size(sig.dtype) > comm.config().ze_pipeline_chunk;
}

Task pipeline_step(std::shared_ptr<Pipeline> p) {
    const bool async_in = p->dev_send && p->in_done, async_out = p->dev_recv && p->out_done;
    auto range = [&](size_t k) {
        size_t first = k * p->chunk;
        return std::pair<size_t, size_t>{first * p->es,
                                         std::min(p->chunk, p->count - first) * p->es};
    };
    auto start_in = [&](size_t k) {
        if (!p->dev_send) return;
        auto [off, len] = range(k);
        std::vector<CopyOp> ops{{const_cast<char*>(p->host_send) + off, p->dev_send + off, len}};
        if (async_in)
            p->copy_in->append(ops, p->in_done->get(k));
        else
            p->copy_in->copy(ops, deadline(p->timeout_s));
    };
    start_in(0);
    for (size_t k = 0; k < p->nchunks; ++k) {
        if (async_in) p->in_done->wait(k, deadline(p->timeout_s));
        if (k + 1 < p->nchunks) start_in(k + 1);
        auto [off, len] = range(k);
        Task t = run_steps(k + 1 == p->nchunks ? p->last : p->full,
                           Buffers{p->host_send + off, p->host_recv + off, {}});
        for (;;) {
            t.resume();
            if (t.done()) break;
            co_await Delegate{t.waiting()};
        }
        if (!p->dev_recv) continue;
        std::vector<CopyOp> ops{{p->dev_recv + off, p->host_recv + off, len}};
        if (async_out)
            p->copy_out->append(ops, p->out_done->get(k));
        else
            p->copy_out->copy(ops, deadline(p->timeout_s));
    }
    if (async_out)
        for (size_t k = 0; k < p->nchunks; ++k) p->out_done->wait(k, deadline(p->timeout_s));
}

Task stream_wait(Copier* stream, double timeout_s) {
    stream->copy({}, deadline(timeout_s));
    co_return;
}

std::shared_ptr<const Schedule> pipeline_schedule(Communicator& comm, const CollSignature& sig,
                                                  const Buffers& bufs, const Region& s,
                                                  const Region& r, Copier* stream) {
    auto p = std::make_shared<Pipeline>();
    p->count = sig.count;
    p->es = dtype_size(sig.dtype);
    p->chunk = std::max<size_t>(1, comm.config().ze_pipeline_chunk / p->es);
    p->nchunks = (p->count + p->chunk - 1) / p->chunk;
    p->timeout_s = comm.config().timeout_s;
    CollSignature chunk_sig = sig;
    chunk_sig.count = p->chunk;
    p->full = comm.schedule_for(chunk_sig, {})->steps;
    chunk_sig.count = p->count - (p->nchunks - 1) * p->chunk;
    p->last = comm.schedule_for(chunk_sig, {})->steps;

    p->host_send = static_cast<const char*>(bufs.send);
    p->host_recv = static_cast<char*>(bufs.recv);
    const bool bcast = sig.coll == CollType::broadcast, root = comm.rank() == sig.root;
    if (s.device() && r.device() && s.p == r.p) {
        // In place (and every broadcast): one host copy; in unless a broadcast's receiver, out
        // unless its root.
        p->recv_buf.emplace(r.bytes);
        p->host_send = p->host_recv = p->recv_buf->data();
        if (!bcast || root) p->dev_send = s.p;
        if (!bcast || !root) p->dev_recv = const_cast<char*>(r.p);
    } else {
        if (s.device()) {
            p->send_buf.emplace(s.bytes);
            p->host_send = p->send_buf->data();
            p->dev_send = s.p;
        }
        if (r.device()) {
            p->recv_buf.emplace(r.bytes);
            p->host_recv = p->recv_buf->data();
            p->dev_recv = const_cast<char*>(r.p);
        }
    }
    if (p->dev_send) {
        p->copy_in = stream ? stream : &copier_for(s.info.device);
        if (p->copy_in->can_append()) p->in_done.emplace(s.info.device, p->nchunks);
    }
    if (p->dev_recv) {
        p->copy_out = stream ? stream : &copier_for(r.info.device);
        if (p->copy_out->can_append()) p->out_done.emplace(r.info.device, p->nchunks);
    }
    log().debug("XPU: {} staged in {} chunks of {} elements{}", sig.describe(), p->nchunks,
                p->chunk, p->in_done || p->out_done ? ", copies overlapped" : "");
    auto sched = std::make_shared<Schedule>();
    sched->sig = sig;
    // A stream's earlier work comes first even when this rank copies nothing in.
    if (stream && !p->dev_send)
        sched->steps.push_back({"ze/stream_wait", [stream, t = p->timeout_s](const Buffers&) {
                                    return stream_wait(stream, t);
                                }});
    sched->steps.push_back({"ze/pipeline", [p](const Buffers&) { return pipeline_step(p); }});
    return sched;
}

}  // namespace

namespace {
// A schedule that stages the call's device buffers (or orders it on a stream), or nullptr.
std::shared_ptr<const Schedule> device_schedule_staged(Communicator& comm,
                                                       const std::shared_ptr<const Schedule>& host,
                                                       const Buffers& bufs, const Region& s,
                                                       const Region& r, Copier* stream);
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
    // With IPC every rank takes part in the exchange, whatever its buffers: ranks must agree.
    // IPC handles open only on the owner's node.
    const bool ipc = comm.config().ze_ipc && !stream && comm.size() > 1 && !comm.multinode() &&
                     ipc_collective(host->sig);
    if (!s.device() && !r.device() && !stream && !ipc && !pipelined(comm, host->sig))
        return nullptr;
    if (ipc) {
        auto staged = device_schedule_staged(comm, host, bufs, s, r, nullptr);
        return ipc_schedule(comm, host->sig, bufs, s, r, staged ? staged : host);
    }
    // Decided from the signature alone, so that every rank splits the call the same way.
    if (pipelined(comm, host->sig)) return pipeline_schedule(comm, host->sig, bufs, s, r, stream);
    return device_schedule_staged(comm, host, bufs, s, r, stream);
}

namespace {

std::shared_ptr<const Schedule> device_schedule_staged(Communicator& comm,
                                                       const std::shared_ptr<const Schedule>& host,
                                                       const Buffers& bufs, const Region& s,
                                                       const Region& r, Copier* stream) {
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

}  // namespace

}  // namespace ccl::ze

// The collectives of the C ABI: argument checks, then the communicator runs the call.
#include <sys/mman.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "core/device_coll.h"
#include "core/group.h"
#include "base/reduce.h"
#include "handles.h"
#include "streams.h"

namespace ccl::capi {

namespace {

// Where the user address space ends: no buffer reaches past it, so no count whose bytes would is
// a count of a real buffer. Linux places the stack at the top of the default space (47 bits on
// x86-64, 39 to 48 on aarch64) and maps above it only with five-level page tables and a hint
// above (then at most 56 bits): one page asked for there says which.
uintptr_t user_space_end() {
    if constexpr (sizeof(uintptr_t) < 8) return UINTPTR_MAX;
    int local = 0;
    const uintptr_t end = std::bit_ceil(reinterpret_cast<uintptr_t>(&local));
    void* p = ::mmap(reinterpret_cast<void*>(end), 4096, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return end;
    ::munmap(p, 4096);
    return reinterpret_cast<uintptr_t>(p) >= end ? uintptr_t(1) << 56 : end;
}
const uintptr_t kUserSpaceEnd = user_space_end();

// The checks below run on every call: their messages are built out of line (cold), so that the
// checks themselves inline to a compare or two.
#define CCL_COLD [[noreturn, gnu::cold, gnu::noinline]]

CCL_COLD void bad_dtype(ccl_datatype_t dtype) {
    throw Error(CCL_ERROR_INVALID_ARGUMENT,
                "datatype " + std::to_string(int(dtype)) + " is not a ccl_datatype_t");
}

CCL_COLD void bad_op(ccl_reduction_t op) {
    throw Error(CCL_ERROR_INVALID_ARGUMENT,
                "reduction " + std::to_string(int(op)) + " is not a ccl_reduction_t");
}

CCL_COLD void bad_count(const char* name, size_t count, ccl_datatype_t dtype) {
    throw Error(CCL_ERROR_INVALID_ARGUMENT, std::string(name) + " " + std::to_string(count) +
                                                " of " + dtype_name(dtype) +
                                                " overflows the address space");
}

CCL_COLD void bad_buffer(const char* name, const void* p, size_t bytes) {
    if (!p) throw Error(CCL_ERROR_INVALID_ARGUMENT, std::string(name) + " is NULL with count > 0");
    char at[32];
    std::snprintf(at, sizeof at, "%p", p);
    throw Error(CCL_ERROR_INVALID_ARGUMENT, std::string(name) + ": " + std::to_string(bytes) +
                                                " bytes from " + at +
                                                " overflow the address space (counts too large)");
}

CCL_COLD void bad_attr_size(const ccl_coll_attr_t* attr) {
    throw Error(CCL_ERROR_INVALID_ARGUMENT, "attr->size is " + std::to_string(attr->size) +
                                                ": initialize attributes with CCL_COLL_ATTR_INIT");
}

void check_dtype(ccl_datatype_t dtype) {
    if (!dtype_valid(dtype)) [[unlikely]]
        bad_dtype(dtype);
}

void check_op(ccl_reduction_t op) {
    if (!op_valid(op)) [[unlikely]]
        bad_op(op);
}

// The byte size of `count` elements, refusing sizes no buffer can have.
size_t byte_size(size_t count, ccl_datatype_t dtype, const char* name) {
    size_t bytes;  // a multiplication, not a division: this is on every call's path
    if (__builtin_mul_overflow(count, dtype_size(dtype), &bytes) || bytes > kUserSpaceEnd)
        [[unlikely]]
        bad_count(name, count, dtype);
    return bytes;
}

// A buffer of `bytes` (from byte_size or a sum of them): not NULL, and within the address space.
void check_buffer(const void* p, size_t bytes, const char* name) {
    if (bytes > 0 && (!p || reinterpret_cast<uintptr_t>(p) > kUserSpaceEnd - bytes)) [[unlikely]]
        bad_buffer(name, p, bytes);
}

// Buffers that overlap (other than in a collective's in-place form, which callers let through)
// would give wrong results.
void check_overlap(const void* send, size_t send_bytes, const void* recv, size_t recv_bytes,
                   const char* in_place) {
    auto s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
    if (send_bytes > 0 && recv_bytes > 0 && s < r + recv_bytes && r < s + send_bytes)
        throw Error(CCL_ERROR_INVALID_ARGUMENT,
                    std::string("send and recv overlap (in place needs ") + in_place + ")");
}

CCL_COLD void bad_rank(const char* what, int rank, int size) {
    throw Error(CCL_ERROR_INVALID_ARGUMENT, std::string(what) + " is " + std::to_string(rank) +
                                                ", must be in [0, " + std::to_string(size) + ")");
}

void check_root(int root, const Communicator& comm) {
    if (root < 0 || root >= comm.size()) [[unlikely]]
        bad_rank("root", root, comm.size());
}

void check_peer(int peer, const Communicator& comm) {
    if (peer < 0 || peer >= comm.size()) [[unlikely]]
        bad_rank("peer", peer, comm.size());
}

// A per-rank count array, appended to `v`; returns the byte size of all its blocks together.
size_t check_counts(const size_t* counts, const Communicator& comm, ccl_datatype_t dtype,
                    const char* name, std::vector<size_t>& v) {
    if (!counts) throw Error(CCL_ERROR_INVALID_ARGUMENT, std::string(name) + " is NULL");
    v.insert(v.end(), counts, counts + comm.size());
    size_t total = 0;
    for (const size_t* c = counts; c != counts + comm.size(); ++c) {
        size_t bytes;
        if (__builtin_mul_overflow(*c, dtype_size(dtype), &bytes) || bytes > kUserSpaceEnd)
            throw Error(CCL_ERROR_INVALID_ARGUMENT,
                        std::string(name) + "[" + std::to_string(c - counts) + "] is " +
                            std::to_string(*c) + " " + dtype_name(dtype) +
                            ": more than the address space holds (overflow)");
        if (bytes > kUserSpaceEnd - total)
            throw Error(CCL_ERROR_INVALID_ARGUMENT,
                        std::string("the counts of ") + name + " overflow the address space");
        total += bytes;
    }
    return total;
}

// The bytes of one block per rank (a count times the communicator's size), refusing sizes no
// buffer can have.
size_t times_ranks(size_t bytes, const Communicator& comm, const char* count_name) {
    size_t total = bytes * size_t(comm.size());
    if (total / size_t(comm.size()) != bytes || total > kUserSpaceEnd)
        throw Error(
            CCL_ERROR_INVALID_ARGUMENT,
            std::string(count_name) + " times the communicator's size overflows the address space");
    return total;
}

// Block `block` of a buffer of equal blocks of `bytes` each: where in-place collectives put their
// own data.
const char* block_of(const void* buf, size_t bytes, int block) {
    return static_cast<const char*>(buf) + bytes * size_t(block);
}

void check_attr(const ccl_coll_attr_t* attr) {
    // Older or newer callers pass their own struct size; it must at least hold the first fields.
    if (attr && attr->size < offsetof(ccl_coll_attr_t, priority) + sizeof(int)) [[unlikely]]
        bad_attr_size(attr);
}

CallOptions options(const ccl_coll_attr_t* attr) {
    CallOptions opts;
    if (!attr) return opts;
    opts.to_cache = attr->to_cache != 0;
    if (opts.to_cache) {
        if (!attr->match_id || !*attr->match_id)
            throw Error(CCL_ERROR_INVALID_ARGUMENT,
                        "attr->to_cache is set but attr->match_id is NULL or empty");
        opts.match_id = attr->match_id;
    }
    return opts;
}

// What device buffers and streams do not support yet.
void xpu_checks(const Communicator& comm, const CollSignature& sig, const Buffers& bufs,
                const ze::Stream* stream, const ccl_coll_attr_t* attr, const ccl_request_t* req) {
    if (stream && req && !(attr && attr->synchronous))
        throw Error(CCL_ERROR_UNSUPPORTED,
                    "a nonblocking call cannot take a stream: pass req NULL or set synchronous");
    if (group_active() &&
        (stream || (ze::enabled() && ze::has_device_buffer(sig, bufs, comm.rank(), comm.size()))))
        throw Error(CCL_ERROR_UNSUPPORTED,
                    "device buffers and streams are not supported inside ccl_group_start / "
                    "ccl_group_end yet");
}

// Runs or queues a planned call, as `attr` and `req` ask.
void dispatch(Communicator& comm, const std::shared_ptr<const Schedule>& schedule,
              const Buffers& bufs, const ccl_coll_attr_t* attr, ccl_request_t* req) {
    if (!req) {
        comm.run(schedule, bufs);
        return;
    }
    auto r = make_pooled<Request>();
    if (attr && attr->synchronous) {
        // Complete now; the request carries the result like any other.
        try {
            comm.run(schedule, bufs);
            r->complete(CCL_SUCCESS);
        } catch (const Error& e) {
            r->complete(e.code(), e.what());
        }
        *req = request_table().add<ccl_request_t>(r);
        r->rethrow();
        return;
    }
    comm.start(schedule, bufs, {r});
    *req = request_table().add<ccl_request_t>(std::move(r));
}

// The communicators this thread's open group recorded calls on, and the group's depth (as
// core/group.cpp counts it). The outermost ccl_group_end enters them all while it issues and
// waits (each is used by one thread at a time); the calls on one it cannot enter complete with
// that error instead.
struct GroupMember {
    ccl_comm_t handle;
    const Communicator* comm;  // kept alive by the group's records
};
thread_local std::vector<GroupMember> group_members;
thread_local int group_depth = 0;

void note_group_member(ccl_comm_t handle, const Communicator& comm) {
    for (const GroupMember& m : group_members)
        if (m.handle == handle) return;
    group_members.push_back({handle, &comm});
}

void end_group() {
    if (group_depth != 1) {  // an inner end, or one without a start (group_end says so)
        group_end();
        --group_depth;
        return;
    }
    group_depth = 0;
    std::vector<GroupMember> members = std::move(group_members);
    group_members.clear();
    std::vector<std::unique_ptr<CommTable::Entry>> entries;
    entries.reserve(members.size());
    for (const GroupMember& m : members) {
        try {
            entries.push_back(
                std::make_unique<CommTable::Entry>(comm_table(), m.handle, "communicator"));
        } catch (const Error& e) {
            group_refuse(*m.comm, e);
        }
    }
    group_end();
}

// submit's other paths: device buffers and streams (src/core/device_coll.h), groups and match_id
// caching.
void submit_general(ccl_comm_t handle, Communicator& comm, const CollSignature& sig,
                    const Buffers& bufs, const ccl_coll_attr_t* attr, ccl_request_t* req) {
    CallOptions opts = options(attr);
    std::shared_ptr<ze::Stream> stream = stream_of(attr);
    if (ze::active() || stream) xpu_checks(comm, sig, bufs, stream.get(), attr, req);
    if (group_active()) {
        std::shared_ptr<Request> r = req ? make_pooled<Request>() : nullptr;
        group_add(comm.shared_from_this(), sig, bufs, opts, r);
        note_group_member(handle, comm);
        if (req) *req = request_table().add<ccl_request_t>(std::move(r));
        return;
    }
    if (ze::active() || stream) {
        // A copy: planning the device part may replace the host plan among the recent ones.
        std::shared_ptr<const Schedule> host = comm.schedule_for(sig, opts);
        auto staged = ze::device_schedule(comm, host, bufs, stream.get());
        dispatch(comm, staged ? staged : host, bufs, attr, req);
        return;
    }
    dispatch(comm, comm.schedule_for(sig, opts), bufs, attr, req);
}

// The options of a call with no match_id: made once, not per call.
const CallOptions kPlainCall{};

// Runs, queues or records (in a group) a checked call, as its attributes and `req` ask. The
// common case (host buffers, no stream, no group, no match_id) takes a few branches here: the
// cost of a small blocking call is mostly its instructions (docs/performance-history.md,
// session 12).
void submit(ccl_comm_t handle, Communicator& comm, const CollSignature& sig, const Buffers& bufs,
            const ccl_coll_attr_t* attr, ccl_request_t* req) {
    if ((attr && attr->to_cache) || has_stream(attr) || ze::active() || group_active())
        [[unlikely]] {
        submit_general(handle, comm, sig, bufs, attr, req);
        return;
    }
    if (sig.coll == CollType::recv) {
        std::shared_ptr<Request> r;
        if (comm.recv_now(sig, bufs, req ? &r : nullptr)) {
            if (req) *req = request_table().add<ccl_request_t>(std::move(r));
            return;
        }
    } else if (sig.coll == CollType::send && comm.send_now(sig, bufs)) {
        if (req) {
            auto r = make_pooled<Request>();
            r->complete(CCL_SUCCESS);
            *req = request_table().add<ccl_request_t>(std::move(r));
        }
        return;
    }
    const std::shared_ptr<const Schedule>& schedule = comm.schedule_for(sig, kPlainCall);
    if (!req) {  // dispatch's first case, one call less on the path of a blocking call
        comm.run(schedule, bufs);
        return;
    }
    dispatch(comm, schedule, bufs, attr, req);
}

}  // namespace

}  // namespace ccl::capi

using namespace ccl;
using namespace ccl::capi;

extern "C" {

ccl_result_t ccl_allreduce(const void* send, void* recv, size_t count, ccl_datatype_t dtype,
                           ccl_reduction_t op, ccl_comm_t comm, const ccl_coll_attr_t* attr,
                           ccl_request_t* req) {
    return guarded(__func__, [&] {
        const auto entry = comm_table().enter(comm, "communicator");  // one thread at a time
        Communicator& c = *entry;
        check_dtype(dtype);
        check_op(op);
        size_t bytes = byte_size(count, dtype, "count");
        check_buffer(send, bytes, "send");
        check_buffer(recv, bytes, "recv");
        if (send != recv) check_overlap(send, bytes, recv, bytes, "send == recv");
        check_attr(attr);
        submit(comm, c, {CollType::allreduce, count, dtype, op, 0}, {send, recv, {}}, attr, req);
    });
}

ccl_result_t ccl_broadcast(void* buf, size_t count, ccl_datatype_t dtype, int root, ccl_comm_t comm,
                           const ccl_coll_attr_t* attr, ccl_request_t* req) {
    return guarded(__func__, [&] {
        const auto entry = comm_table().enter(comm, "communicator");  // one thread at a time
        Communicator& c = *entry;
        check_dtype(dtype);
        check_buffer(buf, byte_size(count, dtype, "count"), "buf");
        check_root(root, c);
        check_attr(attr);
        submit(comm, c, {CollType::broadcast, count, dtype, CCL_SUM, root}, {buf, buf, {}}, attr,
               req);
    });
}

ccl_result_t ccl_barrier(ccl_comm_t comm, ccl_request_t* req) {
    return guarded(__func__, [&] {
        const auto entry = comm_table().enter(comm, "communicator");  // one thread at a time
        Communicator& c = *entry;
        submit(comm, c, CollSignature{}, {}, nullptr, req);
    });
}

ccl_result_t ccl_reduce(const void* send, void* recv, size_t count, ccl_datatype_t dtype,
                        ccl_reduction_t op, int root, ccl_comm_t comm, const ccl_coll_attr_t* attr,
                        ccl_request_t* req) {
    return guarded(__func__, [&] {
        const auto entry = comm_table().enter(comm, "communicator");  // one thread at a time
        Communicator& c = *entry;
        check_dtype(dtype);
        check_op(op);
        check_root(root, c);
        size_t bytes = byte_size(count, dtype, "count");
        check_buffer(send, bytes, "send");
        if (c.rank() == root) {
            check_buffer(recv, bytes, "recv");
            if (send != recv) check_overlap(send, bytes, recv, bytes, "send == recv");
        }
        check_attr(attr);
        submit(comm, c, {CollType::reduce, count, dtype, op, root}, {send, recv, {}}, attr, req);
    });
}

ccl_result_t ccl_allgather(const void* send, void* recv, size_t sendcount, ccl_datatype_t dtype,
                           ccl_comm_t comm, const ccl_coll_attr_t* attr, ccl_request_t* req) {
    return guarded(__func__, [&] {
        const auto entry = comm_table().enter(comm, "communicator");  // one thread at a time
        Communicator& c = *entry;
        check_dtype(dtype);
        size_t bytes = byte_size(sendcount, dtype, "sendcount");
        size_t total = times_ranks(bytes, c, "sendcount");
        check_buffer(send, bytes, "send");
        check_buffer(recv, total, "recv");
        if (send != block_of(recv, bytes, c.rank()))
            check_overlap(send, bytes, recv, total, "send == recv + rank * sendcount");
        check_attr(attr);
        submit(comm, c, {CollType::allgather, sendcount, dtype, CCL_SUM, 0}, {send, recv, {}}, attr,
               req);
    });
}

ccl_result_t ccl_allgatherv(const void* send, size_t sendcount, void* recv,
                            const size_t* recvcounts, ccl_datatype_t dtype, ccl_comm_t comm,
                            const ccl_coll_attr_t* attr, ccl_request_t* req) {
    return guarded(__func__, [&] {
        const auto entry = comm_table().enter(comm, "communicator");  // one thread at a time
        Communicator& c = *entry;
        check_dtype(dtype);
        std::vector<size_t> counts;
        size_t total = check_counts(recvcounts, c, dtype, "recvcounts", counts);
        if (sendcount != counts[size_t(c.rank())])
            throw Error(CCL_ERROR_INVALID_ARGUMENT, "sendcount is " + std::to_string(sendcount) +
                                                        " but recvcounts[" +
                                                        std::to_string(c.rank()) + "] is " +
                                                        std::to_string(counts[size_t(c.rank())]));
        size_t bytes = byte_size(sendcount, dtype, "sendcount"), offset = 0;
        for (int r = 0; r < c.rank(); ++r) offset += counts[size_t(r)] * dtype_size(dtype);
        check_buffer(send, bytes, "send");
        check_buffer(recv, total, "recv");
        if (send != block_of(recv, offset, 1))
            check_overlap(send, bytes, recv, total, "send == recv + this rank's offset");
        check_attr(attr);
        size_t count = total / dtype_size(dtype);
        submit(comm, c, {CollType::allgatherv, count, dtype, CCL_SUM, 0},
               {send, recv, std::move(counts)}, attr, req);
    });
}

ccl_result_t ccl_reduce_scatter(const void* send, void* recv, size_t recvcount,
                                ccl_datatype_t dtype, ccl_reduction_t op, ccl_comm_t comm,
                                const ccl_coll_attr_t* attr, ccl_request_t* req) {
    return guarded(__func__, [&] {
        const auto entry = comm_table().enter(comm, "communicator");  // one thread at a time
        Communicator& c = *entry;
        check_dtype(dtype);
        check_op(op);
        size_t bytes = byte_size(recvcount, dtype, "recvcount");
        size_t total = times_ranks(bytes, c, "recvcount");
        check_buffer(send, total, "send");
        check_buffer(recv, bytes, "recv");
        if (recv != block_of(send, bytes, c.rank()))
            check_overlap(send, total, recv, bytes, "recv == send + rank * recvcount");
        check_attr(attr);
        submit(comm, c, {CollType::reduce_scatter, recvcount, dtype, op, 0}, {send, recv, {}}, attr,
               req);
    });
}

ccl_result_t ccl_alltoall(const void* send, void* recv, size_t count, ccl_datatype_t dtype,
                          ccl_comm_t comm, const ccl_coll_attr_t* attr, ccl_request_t* req) {
    return guarded(__func__, [&] {
        const auto entry = comm_table().enter(comm, "communicator");  // one thread at a time
        Communicator& c = *entry;
        check_dtype(dtype);
        size_t bytes = byte_size(count, dtype, "count");
        size_t total = times_ranks(bytes, c, "count");
        check_buffer(send, total, "send");
        check_buffer(recv, total, "recv");
        if (send != recv) check_overlap(send, total, recv, total, "send == recv");
        check_attr(attr);
        submit(comm, c, {CollType::alltoall, count, dtype, CCL_SUM, 0}, {send, recv, {}}, attr,
               req);
    });
}

ccl_result_t ccl_alltoallv(const void* send, const size_t* sendcounts, void* recv,
                           const size_t* recvcounts, ccl_datatype_t dtype, ccl_comm_t comm,
                           const ccl_coll_attr_t* attr, ccl_request_t* req) {
    return guarded(__func__, [&] {
        const auto entry = comm_table().enter(comm, "communicator");  // one thread at a time
        Communicator& c = *entry;
        check_dtype(dtype);
        std::vector<size_t> counts;  // sendcounts, then recvcounts
        counts.reserve(2 * size_t(c.size()));
        size_t send_total = check_counts(sendcounts, c, dtype, "sendcounts", counts);
        size_t recv_total = check_counts(recvcounts, c, dtype, "recvcounts", counts);
        check_buffer(send, send_total, "send");
        check_buffer(recv, recv_total, "recv");
        if (send == recv && send_total > 0 && recv_total > 0)
            throw Error(CCL_ERROR_INVALID_ARGUMENT,
                        "alltoallv cannot run in place (send == recv): use separate buffers");
        check_overlap(send, send_total, recv, recv_total, "separate buffers for alltoallv");
        check_attr(attr);
        submit(comm, c, {CollType::alltoallv, 0, dtype, CCL_SUM, 0},
               {send, recv, std::move(counts)}, attr, req);
    });
}

ccl_result_t ccl_send(const void* buf, size_t count, ccl_datatype_t dtype, int peer,
                      ccl_comm_t comm, ccl_request_t* req) {
    return guarded(__func__, [&] {
        const auto entry = comm_table().enter(comm, "communicator");  // one thread at a time
        Communicator& c = *entry;
        check_dtype(dtype);
        check_buffer(buf, byte_size(count, dtype, "count"), "buf");
        check_peer(peer, c);
        submit(comm, c, {CollType::send, count, dtype, CCL_SUM, peer}, {buf, nullptr, {}}, nullptr,
               req);
    });
}

ccl_result_t ccl_recv(void* buf, size_t count, ccl_datatype_t dtype, int peer, ccl_comm_t comm,
                      ccl_request_t* req) {
    return guarded(__func__, [&] {
        const auto entry = comm_table().enter(comm, "communicator");  // one thread at a time
        Communicator& c = *entry;
        check_dtype(dtype);
        check_buffer(buf, byte_size(count, dtype, "count"), "buf");
        check_peer(peer, c);
        submit(comm, c, {CollType::recv, count, dtype, CCL_SUM, peer}, {nullptr, buf, {}}, nullptr,
               req);
    });
}

ccl_result_t ccl_group_start(void) {
    return guarded(__func__, [] {
        group_start();
        ++group_depth;
    });
}

ccl_result_t ccl_group_end(void) {
    return guarded(__func__, [] { end_group(); });
}

}  // extern "C"

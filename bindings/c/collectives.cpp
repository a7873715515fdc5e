// The collectives of the C ABI: argument checks and handle lookup, then core submits the call
// (core/submit.h); errors become result codes (api.h: guarded).
#include <sys/mman.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "base/reduce.h"
#include "core/group.h"
#include "core/submit.h"
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

// Hands a checked call to core (core/submit.h). A nonblocking call's request becomes a handle, also
// when a synchronous call failed after making it (the request carries the failure too). Inlined,
// as core's submit is, so that the common case makes no call of its own.
[[gnu::always_inline]] inline void submit_to_core(ccl_comm_t handle, Communicator& comm,
                                                  const CollSignature& sig, const Buffers& bufs,
                                                  const CallAttrs& attrs, bool synchronous,
                                                  ccl_request_t* req) {
    if (!req) {
        submit(comm, handle, sig, bufs, attrs, synchronous, nullptr);
        return;
    }
    std::shared_ptr<Request> r;
    try {
        submit(comm, handle, sig, bufs, attrs, synchronous, &r);
    } catch (...) {
        if (r) *req = request_table().add<ccl_request_t>(std::move(r));
        throw;
    }
    *req = request_table().add<ccl_request_t>(std::move(r));
}

// submit_call for attributes with a match_id or a stream: checked, and the stream looked up.
[[gnu::noinline]] void submit_cached_or_streamed(ccl_comm_t handle, Communicator& comm,
                                                 const CollSignature& sig, const Buffers& bufs,
                                                 const ccl_coll_attr_t* attr, ccl_request_t* req) {
    if (attr->to_cache && (!attr->match_id || !*attr->match_id))
        throw Error(CCL_ERROR_INVALID_ARGUMENT,
                    "attr->to_cache is set but attr->match_id is NULL or empty");
    // Held while the call runs: only calls that complete before returning take a stream. A cached
    // call without one does not look it up.
    const std::shared_ptr<ze::Stream> stream = has_stream(attr) ? stream_of(attr) : nullptr;
    submit_to_core(handle, comm, sig, bufs,
                   {attr->to_cache ? attr->match_id : nullptr, stream.get()},
                   req && attr->synchronous, req);
}

// Hands a checked call to core, its attributes translated. The common case (no match_id, no
// stream) takes a branch or two here: the cost of a small call is its instructions.
void submit_call(ccl_comm_t handle, Communicator& comm, const CollSignature& sig,
                 const Buffers& bufs, const ccl_coll_attr_t* attr, ccl_request_t* req) {
    if ((attr && attr->to_cache) || has_stream(attr)) [[unlikely]] {
        submit_cached_or_streamed(handle, comm, sig, bufs, attr, req);
        return;
    }
    // synchronous means something only with a request: a blocking call does not read it.
    submit_to_core(handle, comm, sig, bufs, kNoAttrs, req && attr && attr->synchronous, req);
}

void check_tag(int tag) {
    if (tag < 0 || tag > CollSignature::kMaxTag) [[unlikely]]
        throw Error(CCL_ERROR_INVALID_ARGUMENT, "tag " + std::to_string(tag) +
                                                    " is out of range (0 to CCL_TAG_MAX, " +
                                                    std::to_string(CollSignature::kMaxTag) + ")");
}

// A send (`coll` send: `buf` is read) or a receive (written). `any`: CCL_ANY_SOURCE is a peer
// (ccl_recv_tagged's receives); elsewhere it is refused as out of range.
ccl_result_t p2p(const char* what, CollType coll, bool any, const void* buf, size_t count,
                 ccl_datatype_t dtype, int peer, int tag, int* source, ccl_comm_t comm,
                 ccl_request_t* req) {
    return guarded(what, [&] {
        const auto entry = comm_table().enter(comm, "communicator");  // one thread at a time
        Communicator& c = *entry;
        check_dtype(dtype);
        check_buffer(buf, byte_size(count, dtype, "count"), "buf");
        if (!any || peer != CCL_ANY_SOURCE) check_peer(peer, c);
        check_tag(tag);
        Buffers bufs;
        if (coll == CollType::send) {
            bufs.send = buf;
        } else {
            bufs.recv = const_cast<void*>(buf);
            // A named peer is the source; any peer's is written by the receive itself.
            if (peer == CCL_ANY_SOURCE)
                bufs.source = source;
            else if (source)
                *source = peer;
        }
        submit_call(comm, c, {coll, count, dtype, CCL_SUM, peer, tag}, bufs, nullptr, req);
    });
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
        submit_call(comm, c, {CollType::allreduce, count, dtype, op, 0}, {send, recv, {}}, attr,
                    req);
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
        submit_call(comm, c, {CollType::broadcast, count, dtype, CCL_SUM, root}, {buf, buf, {}},
                    attr, req);
    });
}

ccl_result_t ccl_barrier(ccl_comm_t comm, ccl_request_t* req) {
    return guarded(__func__, [&] {
        const auto entry = comm_table().enter(comm, "communicator");  // one thread at a time
        Communicator& c = *entry;
        submit_call(comm, c, CollSignature{}, {}, nullptr, req);
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
        submit_call(comm, c, {CollType::reduce, count, dtype, op, root}, {send, recv, {}}, attr,
                    req);
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
        submit_call(comm, c, {CollType::allgather, sendcount, dtype, CCL_SUM, 0}, {send, recv, {}},
                    attr, req);
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
        submit_call(comm, c, {CollType::allgatherv, count, dtype, CCL_SUM, 0},
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
        submit_call(comm, c, {CollType::reduce_scatter, recvcount, dtype, op, 0}, {send, recv, {}},
                    attr, req);
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
        submit_call(comm, c, {CollType::alltoall, count, dtype, CCL_SUM, 0}, {send, recv, {}}, attr,
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
        submit_call(comm, c, {CollType::alltoallv, 0, dtype, CCL_SUM, 0},
                    {send, recv, std::move(counts)}, attr, req);
    });
}

ccl_result_t ccl_send(const void* buf, size_t count, ccl_datatype_t dtype, int peer,
                      ccl_comm_t comm, ccl_request_t* req) {
    return p2p(__func__, CollType::send, false, buf, count, dtype, peer, 0, nullptr, comm, req);
}

ccl_result_t ccl_recv(void* buf, size_t count, ccl_datatype_t dtype, int peer, ccl_comm_t comm,
                      ccl_request_t* req) {
    return p2p(__func__, CollType::recv, false, buf, count, dtype, peer, 0, nullptr, comm, req);
}

ccl_result_t ccl_send_tagged(const void* buf, size_t count, ccl_datatype_t dtype, int peer, int tag,
                             ccl_comm_t comm, ccl_request_t* req) {
    return p2p(__func__, CollType::send, false, buf, count, dtype, peer, tag, nullptr, comm, req);
}

ccl_result_t ccl_recv_tagged(void* buf, size_t count, ccl_datatype_t dtype, int peer, int tag,
                             int* source, ccl_comm_t comm, ccl_request_t* req) {
    return p2p(__func__, CollType::recv, true, buf, count, dtype, peer, tag, source, comm, req);
}

ccl_result_t ccl_group_start(void) {
    return guarded(__func__, [] { group_start(); });
}

ccl_result_t ccl_group_end(void) {
    return guarded(__func__, [] {
        // The outermost end enters each communicator of the group by its handle, as a call does.
        group_end([](const void* handle) -> std::shared_ptr<void> {
            return std::make_shared<CommTable::Entry>(comm_table(), handle, "communicator");
        });
    });
}

}  // extern "C"

// The collectives of the C ABI: argument checks, then the communicator runs the call.
#include <cstddef>
#include <cstdint>

#include "core/group.h"
#include "core/reduce.h"
#include "handles.h"

namespace ccl::capi {

namespace {

void check_dtype(ccl_datatype_t dtype) {
    if (!dtype_valid(dtype))
        throw Error(CCL_ERROR_INVALID_ARGUMENT,
                    "datatype " + std::to_string(int(dtype)) + " is not a ccl_datatype_t");
}

void check_op(ccl_reduction_t op) {
    if (!op_valid(op))
        throw Error(CCL_ERROR_INVALID_ARGUMENT,
                    "reduction " + std::to_string(int(op)) + " is not a ccl_reduction_t");
}

// The byte size of `count` elements, refusing sizes no buffer can have.
size_t byte_size(size_t count, ccl_datatype_t dtype) {
    size_t esize = dtype_size(dtype);
    if (count > size_t(PTRDIFF_MAX) / esize)
        throw Error(CCL_ERROR_INVALID_ARGUMENT, "count " + std::to_string(count) + " of " +
                                                    dtype_name(dtype) +
                                                    " overflows the address space");
    return count * esize;
}

void check_buffer(const void* p, size_t bytes, const char* name) {
    if (!p && bytes > 0)
        throw Error(CCL_ERROR_INVALID_ARGUMENT, std::string(name) + " is NULL with count > 0");
}

// In place means send == recv exactly; a partial overlap would give wrong results.
void check_overlap(const void* send, const void* recv, size_t bytes) {
    auto s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
    if (s != r && bytes > 0 && s < r + bytes && r < s + bytes)
        throw Error(CCL_ERROR_INVALID_ARGUMENT,
                    "send and recv overlap without being equal (in place needs send == recv)");
}

void check_root(int root, const Communicator& comm) {
    if (root < 0 || root >= comm.size())
        throw Error(CCL_ERROR_INVALID_ARGUMENT, "root is " + std::to_string(root) +
                                                    ", must be in [0, " +
                                                    std::to_string(comm.size()) + ")");
}

void check_attr(const ccl_coll_attr_t* attr) {
    // Older or newer callers pass their own struct size; it must at least hold the first fields.
    if (attr && attr->size < offsetof(ccl_coll_attr_t, priority) + sizeof(int))
        throw Error(CCL_ERROR_INVALID_ARGUMENT,
                    "attr->size is " + std::to_string(attr->size) +
                        ": initialize attributes with CCL_COLL_ATTR_INIT");
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

// Runs, queues or records (in a group) a checked call, as its attributes and `req` ask.
void submit(const std::shared_ptr<Communicator>& comm, const CollSignature& sig,
            const Buffers& bufs, const ccl_coll_attr_t* attr, ccl_request_t* req) {
    CallOptions opts = options(attr);
    if (group_active()) {
        std::shared_ptr<Request> r = req ? std::make_shared<Request>() : nullptr;
        group_add(comm, sig, bufs, opts, r);
        if (req) *req = request_table().add<ccl_request_t>(std::move(r));
        return;
    }
    auto schedule = comm->schedule_for(sig, opts);
    if (!req) {
        comm->run(std::move(schedule), bufs);
        return;
    }
    auto r = std::make_shared<Request>();
    if (attr && attr->synchronous) {
        // Complete now; the request carries the result like any other.
        try {
            comm->run(std::move(schedule), bufs);
            r->complete(CCL_SUCCESS);
        } catch (const Error& e) {
            r->complete(e.code(), e.what());
        }
        *req = request_table().add<ccl_request_t>(r);
        r->rethrow();
        return;
    }
    comm->start(std::move(schedule), bufs, {r});
    *req = request_table().add<ccl_request_t>(std::move(r));
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
        auto c = comm_table().get(comm, "communicator");
        check_dtype(dtype);
        check_op(op);
        size_t bytes = byte_size(count, dtype);
        check_buffer(send, bytes, "send");
        check_buffer(recv, bytes, "recv");
        check_overlap(send, recv, bytes);
        check_attr(attr);
        submit(c, {CollType::allreduce, count, dtype, op, 0}, {send, recv}, attr, req);
    });
}

ccl_result_t ccl_broadcast(void* buf, size_t count, ccl_datatype_t dtype, int root, ccl_comm_t comm,
                           const ccl_coll_attr_t* attr, ccl_request_t* req) {
    return guarded(__func__, [&] {
        auto c = comm_table().get(comm, "communicator");
        check_dtype(dtype);
        check_buffer(buf, byte_size(count, dtype), "buf");
        check_root(root, *c);
        check_attr(attr);
        submit(c, {CollType::broadcast, count, dtype, CCL_SUM, root}, {buf, buf}, attr, req);
    });
}

ccl_result_t ccl_barrier(ccl_comm_t comm, ccl_request_t* req) {
    return guarded(__func__, [&] {
        auto c = comm_table().get(comm, "communicator");
        submit(c, CollSignature{}, {}, nullptr, req);
    });
}

ccl_result_t ccl_group_start(void) {
    return guarded(__func__, [] { group_start(); });
}

ccl_result_t ccl_group_end(void) {
    return guarded(__func__, [] { group_end(); });
}

}  // extern "C"

// One benchmarked call; see collective.h.
#include "collective.h"

#include <algorithm>
#include <new>

namespace bench {

char* Buffer::get(size_t bytes) {
    constexpr size_t kPage = 4096;
    bytes = std::max(kPage, (bytes + kPage - 1) / kPage * kPage);
    if (bytes > capacity_) {
        mem_.reset();  // free the old buffer first: the peak stays at one buffer
        mem_.reset(static_cast<char*>(std::aligned_alloc(kPage, bytes)));
        if (!mem_) throw std::bad_alloc();
        capacity_ = bytes;
    }
    return mem_.get();
}

Case::Case(ccl_comm_t comm, int rank, int ranks, const Options& o, Coll coll, ccl_datatype_t dtype,
           ccl_reduction_t op, bool in_place)
    : comm_(comm),
      rank_(rank),
      ranks_(ranks),
      o_(o),
      coll_(coll),
      dtype_(dtype),
      op_(op),
      in_place_(in_place),
      es_(dtype_info(dtype).size),
      pattern_{info(coll).reduces, op} {}

const char* Case::dtype_name() const {
    return coll_ == Coll::barrier ? "none" : dtype_info(dtype_).name;
}
const char* Case::op_name() const { return info(coll_).reduces ? bench::op_name(op_) : "none"; }
int Case::root() const { return info(coll_).rooted ? o_.root : -1; }

std::string Case::title() const {
    const CollInfo& ci = info(coll_);
    std::string t = ci.name;
    if (coll_ != Coll::barrier) t += std::string(", ") + dtype_name();
    if (ci.reduces) t += std::string(", ") + op_name();
    if (ci.rooted) t += ", root " + std::to_string(o_.root);
    if (ci.places == Places::both || ci.places == Places::out_only)
        t += in_place_ ? ", in place" : ", out of place";
    if (o_.uneven && (coll_ == Coll::allgatherv || coll_ == Coll::alltoallv))
        t += ", uneven counts";
    return t;
}

size_t Case::off(const std::vector<size_t>& counts, int upto) const {
    size_t sum = 0;
    for (int r = 0; r < upto; ++r) sum += counts[r];
    return sum;
}

// Uneven counts for alltoallv depend on the distance from sender to receiver, so every rank sends
// and receives the same total: weights 2(d+1)/(n+1) for d = 0 .. n-1 average 1.
size_t Case::alltoallv_count(int from, int to) const {
    size_t d = size_t((to - from + ranks_) % ranks_);
    return o_.uneven ? block_ * 2 * (d + 1) / size_t(ranks_ + 1) : block_;
}

void Case::resize(size_t bytes) {
    const size_t n = size_t(ranks_);
    switch (coll_) {
        case Coll::barrier: block_ = send_elems_ = recv_elems_ = 0; break;
        case Coll::allreduce:
        case Coll::broadcast:
        case Coll::reduce:
        case Coll::sendrecv:
            block_ = std::max<size_t>(1, bytes / es_);
            send_elems_ = recv_elems_ = block_;
            break;
        case Coll::allgather:
        case Coll::reduce_scatter:
        case Coll::alltoall:
            block_ = std::max<size_t>(1, bytes / es_ / n);
            send_elems_ = coll_ == Coll::allgather ? block_ : n * block_;
            recv_elems_ = coll_ == Coll::reduce_scatter ? block_ : n * block_;
            break;
        case Coll::allgatherv:
            block_ = std::max<size_t>(1, bytes / es_ / n);
            counts_.resize(n);
            for (size_t r = 0; r < n; ++r)
                counts_[r] = o_.uneven ? block_ * 2 * (r + 1) / (n + 1) : block_;
            send_elems_ = counts_[rank_];
            recv_elems_ = off(counts_, ranks_);
            break;
        case Coll::alltoallv:
            block_ = std::max<size_t>(1, bytes / es_ / n);
            counts_.resize(n);
            recv_counts_.resize(n);
            for (int j = 0; j < ranks_; ++j) {
                counts_[j] = alltoallv_count(rank_, j);
                recv_counts_[j] = alltoallv_count(j, rank_);
            }
            send_elems_ = off(counts_, ranks_);
            recv_elems_ = off(recv_counts_, ranks_);
            break;
    }
    // nccl-tests' size: the bytes received by allgather(v), sent by the rest.
    bytes_ =
        (coll_ == Coll::allgather || coll_ == Coll::allgatherv ? recv_elems_ : send_elems_) * es_;

    if (!in_place_ && coll_ != Coll::broadcast) {
        send_ = send_buf_.get(send_elems_ * es_);
        recv_ = recv_buf_.get(recv_elems_ * es_);
    } else if (coll_ == Coll::reduce_scatter) {
        send_ = send_buf_.get(send_elems_ * es_);
        recv_ = send_ + size_t(rank_) * block_ * es_;
    } else {
        recv_ = recv_buf_.get(recv_elems_ * es_);
        send_ = coll_ == Coll::allgather    ? recv_ + size_t(rank_) * block_ * es_
                : coll_ == Coll::allgatherv ? recv_ + off(counts_, rank_) * es_
                                            : recv_;
    }

    if (o_.cache) {
        match_id_ = std::string("ccl_bench:") + info(coll_).name + ":" + dtype_name() + ":" +
                    op_name() + ":" + std::to_string(root()) + (in_place_ ? ":in:" : ":out:") +
                    std::to_string(count());
        attr_.match_id = match_id_.c_str();
        attr_.to_cache = 1;
    }
}

void Case::prepare() {
    if (coll_ == Coll::barrier) return;
    if (coll_ == Coll::broadcast && rank_ != o_.root) {
        poison(recv_, block_ * es_);
        return;
    }
    poison(recv_, recv_elems_ * es_);
    fill_input(send_, send_elems_, dtype_, pattern_, rank_, 0);
}

ccl_result_t Case::issue() {
    ccl_request_t req = nullptr;
    ccl_request_t* want_req = o_.nonblocking ? &req : nullptr;
    const ccl_coll_attr_t* a = &attr_;
    ccl_result_t r = CCL_SUCCESS;
    switch (coll_) {
        case Coll::allreduce:
            r = ccl_allreduce(send_, recv_, block_, dtype_, op_, comm_, a, want_req);
            break;
        case Coll::broadcast:
            r = ccl_broadcast(recv_, block_, dtype_, o_.root, comm_, a, want_req);
            break;
        case Coll::reduce:
            r = ccl_reduce(send_, recv_, block_, dtype_, op_, o_.root, comm_, a, want_req);
            break;
        case Coll::allgather:
            r = ccl_allgather(send_, recv_, block_, dtype_, comm_, a, want_req);
            break;
        case Coll::allgatherv:
            r = ccl_allgatherv(send_, counts_[rank_], recv_, counts_.data(), dtype_, comm_, a,
                               want_req);
            break;
        case Coll::reduce_scatter:
            r = ccl_reduce_scatter(send_, recv_, block_, dtype_, op_, comm_, a, want_req);
            break;
        case Coll::alltoall:
            r = ccl_alltoall(send_, recv_, block_, dtype_, comm_, a, want_req);
            break;
        case Coll::alltoallv:
            r = ccl_alltoallv(send_, counts_.data(), recv_, recv_counts_.data(), dtype_, comm_, a,
                              want_req);
            break;
        case Coll::barrier: r = ccl_barrier(comm_, want_req); break;
        case Coll::sendrecv: {
            // A ring: post the receive from rank-1, send to rank+1, then wait for the receive.
            ccl_request_t recv_req = nullptr;
            r = ccl_recv(recv_, block_, dtype_, (rank_ + ranks_ - 1) % ranks_, comm_, &recv_req);
            if (r != CCL_SUCCESS) return r;
            r = ccl_send(send_, block_, dtype_, (rank_ + 1) % ranks_, comm_, want_req);
            if (r == CCL_SUCCESS && req) r = ccl_wait(req);
            if (r == CCL_SUCCESS) r = ccl_wait(recv_req);
            ccl_request_free(recv_req);
            if (req) ccl_request_free(req);
            return r;
        }
    }
    if (req) {
        if (r == CCL_SUCCESS) r = ccl_wait(req);
        ccl_request_free(req);
    }
    return r;
}

uint64_t Case::wrong() const {
    const int n = ranks_;
    uint64_t wrong = 0;
    switch (coll_) {
        case Coll::barrier: break;
        case Coll::allreduce: wrong = wrong_reduced(recv_, block_, dtype_, pattern_, n, 0); break;
        case Coll::reduce:
            if (rank_ == o_.root) wrong = wrong_reduced(recv_, block_, dtype_, pattern_, n, 0);
            break;
        case Coll::broadcast:
            wrong = wrong_copy(recv_, block_, dtype_, pattern_, o_.root, 0);
            break;
        case Coll::sendrecv:
            wrong = wrong_copy(recv_, block_, dtype_, pattern_, (rank_ + n - 1) % n, 0);
            break;
        case Coll::allgather:
            for (int r = 0; r < n; ++r)
                wrong +=
                    wrong_copy(recv_ + size_t(r) * block_ * es_, block_, dtype_, pattern_, r, 0);
            break;
        case Coll::allgatherv:
            for (int r = 0; r < n; ++r)
                wrong +=
                    wrong_copy(recv_ + off(counts_, r) * es_, counts_[r], dtype_, pattern_, r, 0);
            break;
        case Coll::reduce_scatter:
            wrong = wrong_reduced(recv_, block_, dtype_, pattern_, n, size_t(rank_) * block_);
            break;
        case Coll::alltoall:
            // Block j came from rank j, out of block `rank_` of its input.
            for (int j = 0; j < n; ++j)
                wrong += wrong_copy(recv_ + size_t(j) * block_ * es_, block_, dtype_, pattern_, j,
                                    size_t(rank_) * block_);
            break;
        case Coll::alltoallv:
            for (int j = 0; j < n; ++j) {
                size_t first = 0;  // where rank j's block for this rank starts in j's input
                for (int q = 0; q < rank_; ++q) first += alltoallv_count(j, q);
                wrong += wrong_copy(recv_ + off(recv_counts_, j) * es_, recv_counts_[j], dtype_,
                                    pattern_, j, first);
            }
            break;
    }
    return wrong;
}

}  // namespace bench

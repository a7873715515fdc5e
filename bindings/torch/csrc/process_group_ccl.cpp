// The "ccl" backend of torch.distributed: see process_group_ccl.h.
#include "process_group_ccl.h"

#include <torch/csrc/utils/pybind.h>
#include <torch/extension.h>

#include <pybind11/chrono.h>

#if CCL_TORCH_VERSION_MAJOR >= 2
#include <c10/core/impl/VirtualGuardImpl.h>
#endif

#include <ATen/FunctionalTensorWrapper.h>
#include <torch/library.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>

namespace ccl_torch {

namespace {

[[noreturn]] void fail(const std::string& what, ccl_result_t rc) {
    TORCH_CHECK(false, "ccl: ", what, " failed: ", ccl_strerror(rc), ": ", ccl_last_error());
}

// torch gives one tensor per device; the CPU has one device.
at::Tensor& single(std::vector<at::Tensor>& tensors, const char* what) {
    TORCH_CHECK(tensors.size() == 1, "ccl: ", what, " takes one tensor per call, got ",
                tensors.size());
    return tensors[0];
}

#if CCL_TORCH_VERSION_MAJOR >= 2
// XPU tensors go to ccl as they are: ccl asks Level Zero what the data pointer is and stages
// device memory itself (docs/xpu.md). It works outside torch's XPU streams, so the work queued
// on the tensor's current stream must be done first. (Built for torch 2.x; never run: there is
// no XPU or torch 2 here.)
void sync_xpu(const at::Tensor& t) {
    if (t.device().type() != c10::DeviceType::XPU) return;
    c10::impl::VirtualGuardImpl impl(c10::DeviceType::XPU);
    impl.getStream(t.device()).synchronize();
}
bool device_supported(const at::Tensor& t) {
    return t.device().is_cpu() || t.device().type() == c10::DeviceType::XPU;
}
#else
void sync_xpu(const at::Tensor&) {}
// torch 1.13 has no XPU backend registration for ccl: CPU tensors only.
bool device_supported(const at::Tensor& t) { return t.device().is_cpu(); }
#endif

void check_tensor(const at::Tensor& t, const char* what) {
    TORCH_CHECK(t.layout() == at::kStrided, "ccl: ", what,
                ": only dense tensors are supported, got ", t.layout());
    TORCH_CHECK(device_supported(t), "ccl: ", what, ": tensors on ", t.device(),
                " are not supported by this build (CPU, and XPU with torch 2.x)");
    sync_xpu(t);
}

void check_list(const std::vector<at::Tensor>& list, size_t n, const at::Tensor& like,
                const char* what) {
    TORCH_CHECK(list.size() == n, "ccl: ", what, " needs a list of ", n, " tensors, got ",
                list.size());
    for (const auto& t : list) {
        check_tensor(t, what);
        TORCH_CHECK(t.scalar_type() == like.scalar_type(), "ccl: ", what,
                    ": every tensor must have dtype ", like.scalar_type(), ", got ",
                    t.scalar_type());
    }
}

ccl_datatype_t reduction_dtype(at::ScalarType type, const char* what) {
    switch (type) {
        case at::kByte: return CCL_UINT8;
        case at::kChar: return CCL_INT8;
        case at::kShort: return CCL_INT16;
        case at::kInt: return CCL_INT32;
        case at::kLong: return CCL_INT64;
        case at::kHalf: return CCL_FLOAT16;
        case at::kBFloat16: return CCL_BFLOAT16;
        case at::kFloat: return CCL_FLOAT32;
        case at::kDouble: return CCL_FLOAT64;
        default: TORCH_CHECK(false, "ccl: ", what, ": dtype ", type, " cannot be reduced");
    }
}

const char* op_name(c10d::ReduceOp::RedOpType op) {
    switch (op) {
        case c10d::ReduceOp::SUM: return "SUM";
        case c10d::ReduceOp::AVG: return "AVG";
        case c10d::ReduceOp::PRODUCT: return "PRODUCT";
        case c10d::ReduceOp::MIN: return "MIN";
        case c10d::ReduceOp::MAX: return "MAX";
        case c10d::ReduceOp::BAND: return "BAND";
        case c10d::ReduceOp::BOR: return "BOR";
        case c10d::ReduceOp::BXOR: return "BXOR";
        case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
        default: return "an unknown reduction";
    }
}

// A contiguous buffer to reduce, as ccl sees it. Complex numbers are reduced as pairs of reals
// (SUM and AVG only); booleans as bytes, where MAX is logical or and MIN logical and.
struct Reduction {
    void* data;
    size_t count;
    ccl_datatype_t dtype;
    ccl_reduction_t op;
};

Reduction reduction(const at::Tensor& t, const c10d::ReduceOp& reduce_op, const char* what) {
    auto op = static_cast<c10d::ReduceOp::RedOpType>(reduce_op);
    auto unsupported = [&] {
        TORCH_CHECK(false, "ccl: ", what, ": reduction ", op_name(op), " is not supported for ",
                    t.scalar_type(), " (ccl reduces with SUM, AVG, PRODUCT, MIN and MAX)");
    };
    if (t.scalar_type() == at::kBool) {
        ccl_reduction_t r = CCL_MAX;
        if (op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::MAX || op == c10d::ReduceOp::BOR)
            r = CCL_MAX;
        else if (op == c10d::ReduceOp::PRODUCT || op == c10d::ReduceOp::MIN ||
                 op == c10d::ReduceOp::BAND)
            r = CCL_MIN;
        else
            unsupported();
        return {t.data_ptr(), size_t(t.numel()), CCL_UINT8, r};
    }
    ccl_reduction_t r = CCL_SUM;
    switch (op) {
        case c10d::ReduceOp::SUM: r = CCL_SUM; break;
        case c10d::ReduceOp::AVG: r = CCL_AVG; break;
        case c10d::ReduceOp::PRODUCT: r = CCL_PROD; break;
        case c10d::ReduceOp::MIN: r = CCL_MIN; break;
        case c10d::ReduceOp::MAX: r = CCL_MAX; break;
        default: unsupported();
    }
    if (t.is_complex()) {
        if (r != CCL_SUM && r != CCL_AVG) unsupported();
        at::Tensor real = at::view_as_real(t);
        return {real.data_ptr(), size_t(real.numel()), reduction_dtype(real.scalar_type(), what),
                r};
    }
    return {t.data_ptr(), size_t(t.numel()), reduction_dtype(t.scalar_type(), what), r};
}

size_t bytes(const at::Tensor& t) { return size_t(t.numel()) * t.element_size(); }

// Byte offsets of packed blocks.
std::vector<size_t> offsets(const std::vector<size_t>& counts) {
    std::vector<size_t> o(counts.size() + 1, 0);
    for (size_t i = 0; i < counts.size(); ++i) o[i + 1] = o[i] + counts[i];
    return o;
}

// A tensor's bytes [begin, begin + n) as a flat byte tensor sharing its storage.
at::Tensor byte_slice(const at::Tensor& flat_bytes, size_t begin, size_t n) {
    return flat_bytes.narrow(0, int64_t(begin), int64_t(n));
}

// Works whose requests could not all be started wait for the started ones before their tensors
// go away (their peers make the same calls).
void wait_and_free(std::vector<ccl_request_t>& requests) {
    for (auto r : requests) {
        ccl_wait(r);
        ccl_request_free(r);
    }
    requests.clear();
}

// Whether the caller said it will not wait asynchronously: torch 2.8+ options carry asyncOp
// (false for `async_op=False`); older ones do not say, and get a work to wait on.
template <class Options, class = void>
struct HasAsyncOp : std::false_type {};
template <class Options>
struct HasAsyncOp<Options, std::void_t<decltype(std::declval<Options>().asyncOp)>>
    : std::true_type {};
template <class Options>
bool blocking(const Options& opts) {
    if constexpr (HasAsyncOp<Options>::value)
        return !opts.asyncOp;
    else
        return false;
}

const c10::TypePtr& tensor_list_type() {
    static const c10::TypePtr type = c10::ListType::create(c10::TensorType::get());
    return type;
}

}  // namespace

// One collective being issued: what it started, what it must keep alive, what it runs after.
// A blocking call runs each ccl call to completion in run() and its finish steps in issue().
struct ProcessGroupCCL::Call {
    const char* what;
    bool blocking = false;
    int source = -1;                  // a receive's peer
    std::shared_ptr<int> any_source;  // a receive from any peer: where ccl writes the sender
    std::vector<ccl_request_t> requests;
    std::vector<at::Tensor> outputs;  // Work::result()
    std::vector<at::Tensor> keep;
    std::vector<std::function<void()>> finish;

    explicit Call(const char* name, bool blocking_call = false)
        : what(name), blocking(blocking_call) {}
    ~Call() { wait_and_free(requests); }  // only when issue() did not take them

    // A contiguous tensor ccl may read.
    at::Tensor input(const at::Tensor& t) {
        check_tensor(t, what);
        keep.push_back(t);
        if (t.is_contiguous()) return t;
        at::Tensor c = t.contiguous();
        keep.push_back(c);
        return c;
    }

    // A contiguous tensor ccl may write, copied back into `t` afterwards if `t` is not one.
    // `inout`: ccl also reads its current values.
    at::Tensor output(const at::Tensor& t, bool inout) {
        check_tensor(t, what);
        keep.push_back(t);
        if (t.is_contiguous()) return t;
        at::Tensor c = inout ? t.contiguous() : at::empty_like(t, at::MemoryFormat::Contiguous);
        keep.push_back(c);
        finish.push_back([t, c] { t.copy_(c); });
        return c;
    }

    // A new contiguous buffer of `n` bytes.
    at::Tensor scratch(size_t n) {
        at::Tensor s = at::empty({int64_t(n)}, at::TensorOptions().dtype(at::kByte));
        keep.push_back(s);
        return s;
    }

    // Starts one nonblocking ccl call; `start` passes the request pointer to it.
    template <class F>
    void run(F&& start) {
        ccl_request_t r = nullptr;
        ccl_result_t rc = start(blocking ? nullptr : &r);
        if (rc != CCL_SUCCESS) {
            std::string message = std::string(what) + ": " + ccl_last_error();
            wait_and_free(requests);
            TORCH_CHECK(false, "ccl: ", message, " (", ccl_strerror(rc), ")");
        }
        if (r) requests.push_back(r);
    }
};

// ---- Work -------------------------------------------------------------------------------------

CclWork::CclWork(int rank, c10d::OpType type, std::vector<ccl_request_t> requests,
                 std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep,
                 std::function<void()> finish, std::shared_ptr<Completer> completer)
    : c10d::Work(rank, type),
      requests_(std::move(requests)),
      outputs_(std::move(outputs)),
      keep_(std::move(keep)),
      finish_(std::move(finish)),
      completer_(std::move(completer)) {}

CclWork::~CclWork() {
    // ccl may still read or write the tensors this work keeps alive.
    try {
        complete();
    } catch (...) {
    }
}

void CclWork::complete() {
    std::lock_guard<std::mutex> lock(complete_mu_);
    if (done_.load(std::memory_order_acquire)) return;
    std::exception_ptr error;
    for (auto r : requests_) {
        ccl_result_t rc = ccl_wait(r);
        if (rc != CCL_SUCCESS && !error)
            error = std::make_exception_ptr(
                std::runtime_error(std::string("ccl: ") + c10d::opTypeToString(opType_) +
                                   " failed: " + ccl_strerror(rc) + ": " + ccl_last_error()));
    }
    for (auto r : requests_) ccl_request_free(r);
    requests_.clear();
    if (!error && finish_) {
        try {
            finish_();
        } catch (...) {
            error = std::current_exception();
        }
    }
    keep_.clear();
    {
        std::lock_guard<std::mutex> base_lock(mutex_);
        completed_ = true;
        exception_ = error;
    }
    cv_.notify_all();
    done_.store(true, std::memory_order_release);
    settle_future();
}

void CclWork::settle_future() {
    // getFuture makes the future under this lock, then looks at done_: one of the two settles it.
    std::lock_guard<std::mutex> lock(future_mu_);
    if (!future_ || future_->completed()) return;
    if (auto e = exception())
        future_->setError(e);
    else
        future_->markCompleted(c10::IValue(outputs_));
}

bool CclWork::isCompleted() {
    if (done_.load(std::memory_order_acquire)) return true;
    std::unique_lock<std::mutex> lock(complete_mu_, std::try_to_lock);
    if (!lock.owns_lock()) return false;  // another thread is completing it
    for (auto r : requests_) {
        int done = 0;
        if (ccl_test(r, &done) != CCL_SUCCESS) break;  // failed: complete() reports it
        if (!done) return false;
    }
    lock.unlock();
    complete();
    return true;
}

bool CclWork::isSuccess() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return completed_ && !exception_;
}

std::exception_ptr CclWork::exception() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return exception_;
}

std::vector<at::Tensor> CclWork::result() { return outputs_; }

int CclWork::sourceRank() const {
    TORCH_CHECK(opType_ == c10d::OpType::RECV || opType_ == c10d::OpType::RECVANYSOURCE,
                "ccl: sourceRank() is only for the works of receives");
    if (!any_source_) return source_;
    TORCH_CHECK(done_.load(std::memory_order_acquire),
                "ccl: sourceRank(): the receive from any source has not completed; wait first");
    return *any_source_;
}

bool CclWork::wait(std::chrono::milliseconds timeout) {
    if (timeout > std::chrono::milliseconds(0) && !done_.load(std::memory_order_acquire)) {
        // A deadline of the caller's own, shorter than CCL_TIMEOUT: poll.
        auto deadline = std::chrono::steady_clock::now() + timeout;
        auto nap = std::chrono::microseconds(10);
        while (!isCompleted()) {
            TORCH_CHECK(std::chrono::steady_clock::now() < deadline,
                        "ccl: ", c10d::opTypeToString(opType_), " did not complete within ",
                        timeout.count(), " ms");
            std::this_thread::sleep_for(nap);
            nap = std::min(nap * 2, std::chrono::microseconds(10000));
        }
    }
    complete();
    if (auto e = exception()) std::rethrow_exception(e);
    return true;
}

c10::intrusive_ptr<c10::ivalue::Future> CclWork::getFuture() {
    c10::intrusive_ptr<c10::ivalue::Future> future;
    bool made = false;
    {
        std::lock_guard<std::mutex> lock(future_mu_);
        if (!future_) {
            future_ = c10::make_intrusive<c10::ivalue::Future>(tensor_list_type());
            made = true;
        }
        future = future_;
    }
    if (done_.load(std::memory_order_acquire))
        settle_future();
    else if (made)
        completer_->add(c10::intrusive_ptr<CclWork>::unsafe_reclaim_from_nonowning(this));
    return future;
}

// ---- Completer --------------------------------------------------------------------------------

void Completer::add(c10::intrusive_ptr<CclWork> work) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!stop_) {
            // The thread keeps its completer alive, so that a work it completes never destroys
            // the completer under it.
            if (!thread_.joinable())
                thread_ = std::thread([self = shared_from_this()] { self->run(); });
            queue_.push_back(std::move(work));
            cv_.notify_one();
            return;
        }
    }
    work->complete();  // the backend is going away: complete it here
}

void Completer::run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, with nothing left
        auto work = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        work->complete();
        work.reset();
        lock.lock();
    }
}

void Completer::stop() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_one();
    // The thread's own reference may be the last one: it cannot join itself, and it is ending.
    if (thread_.joinable()) {
        if (thread_.get_id() == std::this_thread::get_id())
            thread_.detach();
        else
            thread_.join();
    }
}

Completer::~Completer() { stop(); }

// ---- ProcessGroupCCL --------------------------------------------------------------------------

ProcessGroupCCL::ProcessGroupCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                 std::chrono::milliseconds)
    : BackendBase(rank, size), completer_(std::make_shared<Completer>()) {
    // Every group gets its own KVS, served by its rank 0 for the group's lifetime; the torch
    // store (prefixed per group by torch) carries the address.
    const std::string key = "ccl_kvs_address";
    ccl_result_t rc;
    try {
        if (rank == 0) {
            if ((rc = ccl_kvs_create_main(&kvs_)) != CCL_SUCCESS) fail("creating the KVS", rc);
            char address[CCL_KVS_ADDRESS_MAX];
            if ((rc = ccl_kvs_get_address(kvs_, address, sizeof address)) != CCL_SUCCESS)
                fail("reading the KVS address", rc);
            std::string a(address);
            store->set(key, std::vector<uint8_t>(a.begin(), a.end()));
        } else {
            auto v = store->get(key);
            std::string a(v.begin(), v.end());
            // Not quoted: the address carries the job's secret.
            if ((rc = ccl_kvs_connect(a.c_str(), &kvs_)) != CCL_SUCCESS)
                fail("connecting to the group's KVS", rc);
        }
        if ((rc = ccl_comm_create(size, rank, kvs_, &comm_)) != CCL_SUCCESS)
            fail("creating the communicator", rc);
    } catch (...) {
        if (kvs_) ccl_kvs_destroy(kvs_);  // the destructor does not run for a failed constructor
        throw;
    }
}

ProcessGroupCCL::~ProcessGroupCCL() {
    completer_->stop();  // finishes the works whose futures were asked for
    if (comm_) ccl_comm_destroy(comm_);
    if (kvs_) ccl_kvs_destroy(kvs_);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::issue(c10d::OpType type, Call& call) {
    ++seq_;
    if (call.blocking) {
        // Done: the results go where they belong now, and the work has nothing to wait for.
        for (auto& f : call.finish) f();
        auto work = c10::make_intrusive<CclWork>(rank_, type, std::vector<ccl_request_t>{},
                                                 std::move(call.outputs), std::vector<at::Tensor>{},
                                                 nullptr, completer_);
        work->set_source(call.source, std::move(call.any_source));
        work->complete();
        return work;
    }
    std::function<void()> finish;
    if (!call.finish.empty())
        finish = [steps = std::move(call.finish)] {
            for (auto& f : steps) f();
        };
    auto work = c10::make_intrusive<CclWork>(rank_, type, std::exchange(call.requests, {}),
                                             std::move(call.outputs), std::move(call.keep),
                                             std::move(finish), completer_);
    work->set_source(call.source, std::move(call.any_source));
    return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::broadcast(std::vector<at::Tensor>& tensors,
                                                          const c10d::BroadcastOptions& opts) {
    Call call("broadcast", blocking(opts));
    at::Tensor& t = single(tensors, call.what);
    at::Tensor buf = call.output(t, rank_ == opts.rootRank);
    std::lock_guard<std::mutex> lock(issue_mu_);
    call.run([&](ccl_request_t* r) {
        return ccl_broadcast(buf.data_ptr(), bytes(buf), CCL_UINT8, int(opts.rootRank), comm_,
                             nullptr, r);
    });
    call.outputs = {t};
    return issue(c10d::OpType::BROADCAST, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
    return allreduce_tensor(single(tensors, "allreduce"), opts.reduceOp, {}, blocking(opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::allreduce_tensor(at::Tensor& t,
                                                                 const c10d::ReduceOp& op,
                                                                 const std::string& match_id,
                                                                 bool blocking_call) {
    Call call("allreduce", blocking_call);
    at::Tensor buf = call.output(t, true);
    Reduction red = reduction(buf, op, call.what);
    ccl_coll_attr_t attr = CCL_COLL_ATTR_INIT;
    if (!match_id.empty()) {
        attr.match_id = match_id.c_str();
        attr.to_cache = 1;
    }
    std::lock_guard<std::mutex> lock(issue_mu_);
    call.run([&](ccl_request_t* r) {
        return ccl_allreduce(red.data, red.data, red.count, red.dtype, red.op, comm_,
                             match_id.empty() ? nullptr : &attr, r);
    });
    call.outputs = {t};
    return issue(c10d::OpType::ALLREDUCE, call);
}

void ProcessGroupCCL::allreduce_now(at::Tensor& t, const c10d::ReduceOp& op) {
    if (!t.is_contiguous() || !t.device().is_cpu() || t.layout() != at::kStrided) {
        allreduce_tensor(t, op, {}, true);  // staged, checked and copied back as any call
        return;
    }
    Reduction red = reduction(t, op, "allreduce");
    std::lock_guard<std::mutex> lock(issue_mu_);
    ccl_result_t rc =
        ccl_allreduce(red.data, red.data, red.count, red.dtype, red.op, comm_, nullptr, nullptr);
    if (rc != CCL_SUCCESS) fail("allreduce", rc);
    ++seq_;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
    Call call("allreduce_coalesced", blocking(opts));
    TORCH_CHECK(!tensors.empty(), "ccl: allreduce_coalesced needs at least one tensor");
    check_list(tensors, tensors.size(), tensors[0], call.what);
    // One allreduce over the tensors packed together, then back into each.
    std::vector<at::Tensor> flat_parts;
    for (const auto& t : tensors) flat_parts.push_back(t.reshape(-1));
    at::Tensor flat = at::cat(flat_parts);
    call.keep.push_back(flat);
    Reduction red = reduction(flat, opts.reduceOp, call.what);
    call.finish.push_back([tensors, flat] {
        int64_t at = 0;
        for (const auto& t : tensors) {
            t.copy_(flat.narrow(0, at, t.numel()).view(t.sizes()));
            at += t.numel();
        }
    });
    std::lock_guard<std::mutex> lock(issue_mu_);
    call.run([&](ccl_request_t* r) {
        return ccl_allreduce(red.data, red.data, red.count, red.dtype, red.op, comm_, nullptr, r);
    });
    call.outputs = tensors;
    call.keep.insert(call.keep.end(), tensors.begin(), tensors.end());
    return issue(c10d::OpType::ALLREDUCE_COALESCED, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::reduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::ReduceOptions& opts) {
    Call call("reduce", blocking(opts));
    at::Tensor& t = single(tensors, call.what);
    int root = int(opts.rootRank);
    // Only the root's tensor changes; the others are read.
    at::Tensor buf = rank_ == root ? call.output(t, true) : call.input(t);
    Reduction red = reduction(buf, opts.reduceOp, call.what);
    std::lock_guard<std::mutex> lock(issue_mu_);
    call.run([&](ccl_request_t* r) {
        return ccl_reduce(red.data, rank_ == root ? red.data : nullptr, red.count, red.dtype,
                          red.op, root, comm_, nullptr, r);
    });
    call.outputs = {t};
    return issue(c10d::OpType::REDUCE, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
    Call call("allgather", blocking(opts));
    at::Tensor in = call.input(single(inputs, call.what));
    TORCH_CHECK(outputs.size() == 1, "ccl: allgather takes one output list per call");
    std::vector<at::Tensor>& list = outputs[0];
    check_list(list, size_t(size_), in, call.what);
    // Gathered packed into one buffer (blocks may differ in size), then copied out.
    std::vector<size_t> counts;
    for (const auto& o : list) counts.push_back(bytes(o));
    TORCH_CHECK(counts[size_t(rank_)] == bytes(in), "ccl: allgather: this rank's output tensor (",
                counts[size_t(rank_)], " bytes) and input (", bytes(in), " bytes) differ");
    std::vector<size_t> at = offsets(counts);
    at::Tensor flat = call.scratch(at.back());
    call.finish.push_back([list, flat, at] {
        for (size_t r = 0; r < list.size(); ++r)
            list[r].copy_(byte_slice(flat, at[r], at[r + 1] - at[r])
                              .view(list[r].scalar_type())
                              .view(list[r].sizes()));
    });
    call.keep.insert(call.keep.end(), list.begin(), list.end());
    std::lock_guard<std::mutex> lock(issue_mu_);
    call.run([&](ccl_request_t* r) {
        return ccl_allgatherv(in.data_ptr(), bytes(in), flat.data_ptr(), counts.data(), CCL_UINT8,
                              comm_, nullptr, r);
    });
    call.outputs = list;
    return issue(c10d::OpType::ALLGATHER, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
    Call call("all_gather_coalesced", blocking(opts));
    TORCH_CHECK(outputs.size() == size_t(size_), "ccl: all_gather_coalesced needs ", size_,
                " output lists, got ", outputs.size());
    // Every rank's inputs packed into one block, gathered with one allgatherv, copied out.
    std::vector<at::Tensor> parts;
    for (const auto& t : inputs) parts.push_back(call.input(t).reshape(-1).view(at::kByte));
    at::Tensor send = parts.empty() ? call.scratch(0) : at::cat(parts);
    call.keep.push_back(send);
    std::vector<size_t> counts;
    for (int r = 0; r < size_; ++r) {
        auto& list = outputs[size_t(r)];
        TORCH_CHECK(list.size() == inputs.size(), "ccl: all_gather_coalesced: output list ", r,
                    " has ", list.size(), " tensors for ", inputs.size(), " inputs");
        size_t n = 0;
        for (size_t i = 0; i < list.size(); ++i) {
            check_tensor(list[i], call.what);
            TORCH_CHECK(list[i].scalar_type() == inputs[i].scalar_type() &&
                            list[i].numel() == inputs[i].numel(),
                        "ccl: all_gather_coalesced: output ", r, ".", i, " (", list[i].numel(), " ",
                        list[i].scalar_type(), ") does not match input ", i, " (",
                        inputs[i].numel(), " ", inputs[i].scalar_type(), ")");
            n += bytes(list[i]);
        }
        counts.push_back(n);
    }
    std::vector<size_t> at = offsets(counts);
    at::Tensor recv = call.scratch(at.back());
    call.finish.push_back([outputs, recv, at] {
        for (size_t r = 0; r < outputs.size(); ++r) {
            size_t o = at[r];
            for (const auto& t : outputs[r]) {
                t.copy_(byte_slice(recv, o, bytes(t)).view(t.scalar_type()).view(t.sizes()));
                o += bytes(t);
            }
        }
    });
    for (const auto& list : outputs) call.keep.insert(call.keep.end(), list.begin(), list.end());
    std::lock_guard<std::mutex> lock(issue_mu_);
    call.run([&](ccl_request_t* r) {
        return ccl_allgatherv(send.data_ptr(), bytes(send), recv.data_ptr(), counts.data(),
                              CCL_UINT8, comm_, nullptr, r);
    });
    call.outputs.clear();
    for (const auto& list : outputs)
        call.outputs.insert(call.outputs.end(), list.begin(), list.end());
    return issue(c10d::OpType::ALLGATHER_COALESCED, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
    Call call("all_gather_into_tensor", blocking(opts));
    at::Tensor in = call.input(input);
    at::Tensor out = call.output(output, false);
    TORCH_CHECK(out.scalar_type() == in.scalar_type() && bytes(out) == bytes(in) * size_t(size_),
                "ccl: all_gather_into_tensor: the output must hold ", size_, " times the input (",
                in.numel(), " ", in.scalar_type(), "), got ", out.numel(), " ", out.scalar_type());
    std::lock_guard<std::mutex> lock(issue_mu_);
    call.run([&](ccl_request_t* r) {
        return ccl_allgather(in.data_ptr(), out.data_ptr(), bytes(in), CCL_UINT8, comm_, nullptr,
                             r);
    });
    call.outputs = {output};
    return issue(c10d::OpType::_ALLGATHER_BASE, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
    Call call("gather", blocking(opts));
    at::Tensor in = call.input(single(inputs, call.what));
    int root = int(opts.rootRank);
    // Point to point: every rank sends to the root (sends never wait for their receiver).
    std::lock_guard<std::mutex> lock(issue_mu_);
    if (rank_ != root) {
        TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                    "ccl: gather: only the root passes output tensors");
        call.run([&](ccl_request_t* r) {
            return ccl_send(in.data_ptr(), bytes(in), CCL_UINT8, root, comm_, r);
        });
        return issue(c10d::OpType::GATHER, call);
    }
    TORCH_CHECK(outputs.size() == 1, "ccl: gather takes one output list per call");
    std::vector<at::Tensor>& list = outputs[0];
    check_list(list, size_t(size_), in, call.what);
    for (int r = 0; r < size_; ++r) {
        TORCH_CHECK(bytes(list[size_t(r)]) == bytes(in),
                    "ccl: gather: every output tensor must have the input's size");
        at::Tensor out = call.output(list[size_t(r)], false);
        if (r == rank_) {
            out.copy_(in.reshape(out.sizes()));
            continue;
        }
        call.run([&](ccl_request_t* req) {
            return ccl_recv(out.data_ptr(), bytes(out), CCL_UINT8, r, comm_, req);
        });
    }
    call.outputs = list;
    return issue(c10d::OpType::GATHER, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
    Call call("scatter", blocking(opts));
    at::Tensor& target = single(outputs, call.what);
    at::Tensor out = call.output(target, false);
    int root = int(opts.rootRank);
    std::lock_guard<std::mutex> lock(issue_mu_);
    if (rank_ == root) {
        TORCH_CHECK(inputs.size() == 1, "ccl: scatter takes one input list per call");
        check_list(inputs[0], size_t(size_), out, call.what);
        for (int r = 0; r < size_; ++r) {
            at::Tensor in = call.input(inputs[0][size_t(r)]);
            TORCH_CHECK(bytes(in) == bytes(out),
                        "ccl: scatter: every input tensor must have the output's size");
            if (r == rank_) {
                out.copy_(in.reshape(out.sizes()));
                continue;
            }
            call.run([&](ccl_request_t* req) {
                return ccl_send(in.data_ptr(), bytes(in), CCL_UINT8, r, comm_, req);
            });
        }
    } else {
        TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                    "ccl: scatter: only the root passes input tensors");
        call.run([&](ccl_request_t* r) {
            return ccl_recv(out.data_ptr(), bytes(out), CCL_UINT8, root, comm_, r);
        });
    }
    call.outputs = {target};
    return issue(c10d::OpType::SCATTER, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
    Call call("reduce_scatter", blocking(opts));
    at::Tensor& target = single(outputs, call.what);
    at::Tensor out = call.output(target, false);
    TORCH_CHECK(inputs.size() == 1, "ccl: reduce_scatter takes one input list per call");
    check_list(inputs[0], size_t(size_), out, call.what);
    std::vector<at::Tensor> parts;
    for (const auto& t : inputs[0]) {
        TORCH_CHECK(t.numel() == out.numel(),
                    "ccl: reduce_scatter: every input tensor must have the output's size (",
                    out.numel(), " elements), got ", t.numel());
        parts.push_back(t.reshape(-1));
    }
    at::Tensor flat = at::cat(parts);  // the blocks packed in rank order
    call.keep.push_back(flat);
    Reduction in = reduction(flat, opts.reduceOp, call.what);
    Reduction red = reduction(out, opts.reduceOp, call.what);
    std::lock_guard<std::mutex> lock(issue_mu_);
    call.run([&](ccl_request_t* r) {
        return ccl_reduce_scatter(in.data, red.data, red.count, red.dtype, red.op, comm_, nullptr,
                                  r);
    });
    call.outputs = {target};
    return issue(c10d::OpType::REDUCE_SCATTER, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
    Call call("reduce_scatter_tensor", blocking(opts));
    at::Tensor in = call.input(input);
    at::Tensor out = call.output(output, false);
    TORCH_CHECK(out.scalar_type() == in.scalar_type() && in.numel() == out.numel() * size_,
                "ccl: reduce_scatter_tensor: the input must hold ", size_, " times the output (",
                out.numel(), " ", out.scalar_type(), "), got ", in.numel(), " ", in.scalar_type());
    Reduction send = reduction(in, opts.reduceOp, call.what);
    Reduction red = reduction(out, opts.reduceOp, call.what);
    std::lock_guard<std::mutex> lock(issue_mu_);
    call.run([&](ccl_request_t* r) {
        return ccl_reduce_scatter(send.data, red.data, red.count, red.dtype, red.op, comm_, nullptr,
                                  r);
    });
    call.outputs = {output};
    return issue(c10d::OpType::_REDUCE_SCATTER_BASE, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                              std::vector<int64_t>& output_splits,
                                                              std::vector<int64_t>& input_splits,
                                                              const c10d::AllToAllOptions& opts) {
    Call call("all_to_all_single", blocking(opts));
    at::Tensor in = call.input(input);
    at::Tensor out = call.output(output, false);
    TORCH_CHECK(out.scalar_type() == in.scalar_type(), "ccl: all_to_all_single: the output (",
                out.scalar_type(), ") and input (", in.scalar_type(), ") dtypes differ");
    // Splits count rows (slices of the first dimension); none given means equal blocks.
    auto counts = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* name) {
        std::vector<size_t> c(size_t(size_), 0);
        int64_t rows = t.dim() > 0 ? t.size(0) : 1;
        size_t row_bytes = rows > 0 ? bytes(t) / size_t(rows) : 0;
        if (splits.empty()) {
            TORCH_CHECK(rows % size_ == 0, "ccl: all_to_all_single: ", name, " has ", rows,
                        " rows, which do not split evenly over ", size_, " ranks");
            for (auto& x : c) x = size_t(rows / size_) * row_bytes;
            return c;
        }
        TORCH_CHECK(splits.size() == size_t(size_), "ccl: all_to_all_single: ", name,
                    " split sizes need ", size_, " entries, got ", splits.size());
        int64_t total = 0;
        for (size_t j = 0; j < c.size(); ++j) {
            TORCH_CHECK(splits[j] >= 0, "ccl: all_to_all_single: negative split size");
            c[j] = size_t(splits[j]) * row_bytes;
            total += splits[j];
        }
        TORCH_CHECK(total == rows, "ccl: all_to_all_single: ", name, " split sizes sum to ", total,
                    ", the tensor has ", rows, " rows");
        return c;
    };
    std::vector<size_t> send_counts = counts(in, input_splits, "input");
    std::vector<size_t> recv_counts = counts(out, output_splits, "output");
    std::lock_guard<std::mutex> lock(issue_mu_);
    call.run([&](ccl_request_t* r) {
        return ccl_alltoallv(in.data_ptr(), send_counts.data(), out.data_ptr(), recv_counts.data(),
                             CCL_UINT8, comm_, nullptr, r);
    });
    call.outputs = {output};
    return issue(c10d::OpType::ALLTOALL_BASE, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::alltoall(std::vector<at::Tensor>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::AllToAllOptions& opts) {
    Call call("all_to_all", blocking(opts));
    TORCH_CHECK(!inputs.empty(), "ccl: all_to_all needs ", size_, " input tensors");
    check_list(inputs, size_t(size_), inputs[0], call.what);
    check_list(outputs, size_t(size_), inputs[0], call.what);
    // Packed into one send buffer and one receive buffer, then copied out.
    std::vector<at::Tensor> parts;
    std::vector<size_t> send_counts, recv_counts;
    for (const auto& t : inputs) {
        parts.push_back(t.reshape(-1));
        send_counts.push_back(bytes(t));
    }
    for (const auto& t : outputs) recv_counts.push_back(bytes(t));
    at::Tensor send = at::cat(parts);
    call.keep.push_back(send);
    std::vector<size_t> at = offsets(recv_counts);
    at::Tensor recv = call.scratch(at.back());
    call.finish.push_back([outputs, recv, at] {
        for (size_t r = 0; r < outputs.size(); ++r)
            outputs[r].copy_(byte_slice(recv, at[r], at[r + 1] - at[r])
                                 .view(outputs[r].scalar_type())
                                 .view(outputs[r].sizes()));
    });
    call.keep.insert(call.keep.end(), outputs.begin(), outputs.end());
    std::lock_guard<std::mutex> lock(issue_mu_);
    call.run([&](ccl_request_t* r) {
        return ccl_alltoallv(send.data_ptr(), send_counts.data(), recv.data_ptr(),
                             recv_counts.data(), CCL_UINT8, comm_, nullptr, r);
    });
    call.outputs = outputs;
    return issue(c10d::OpType::ALLTOALL, call);
}

static void check_tag(int tag, const char* what) {
    TORCH_CHECK(tag >= 0 && tag <= CCL_TAG_MAX, "ccl: ", what, ": tag ", tag,
                " is out of range (0 to ", CCL_TAG_MAX, ")");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::send(std::vector<at::Tensor>& tensors, int dst,
                                                     int tag) {
    Call call("send");
    check_tag(tag, call.what);
    at::Tensor in = call.input(single(tensors, call.what));
    std::lock_guard<std::mutex> lock(issue_mu_);
    call.run([&](ccl_request_t* r) {
        return ccl_send_tagged(in.data_ptr(), bytes(in), CCL_UINT8, dst, tag, comm_, r);
    });
    return issue(c10d::OpType::SEND, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::recv(std::vector<at::Tensor>& tensors, int src,
                                                     int tag) {
    Call call("recv");
    check_tag(tag, call.what);
    at::Tensor& t = single(tensors, call.what);
    at::Tensor out = call.output(t, false);
    std::lock_guard<std::mutex> lock(issue_mu_);
    call.run([&](ccl_request_t* r) {
        return ccl_recv_tagged(out.data_ptr(), bytes(out), CCL_UINT8, src, tag, nullptr, comm_, r);
    });
    call.outputs = {t};
    call.source = src;
    return issue(c10d::OpType::RECV, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::recvAnysource(std::vector<at::Tensor>& tensors,
                                                              int tag) {
    Call call("recv from any source");
    check_tag(tag, call.what);
    at::Tensor& t = single(tensors, call.what);
    at::Tensor out = call.output(t, false);
    // ccl writes the sender's rank into the work as the receive completes.
    call.any_source = std::make_shared<int>(-1);
    std::lock_guard<std::mutex> lock(issue_mu_);
    call.run([&](ccl_request_t* r) {
        return ccl_recv_tagged(out.data_ptr(), bytes(out), CCL_UINT8, CCL_ANY_SOURCE, tag,
                               call.any_source.get(), comm_, r);
    });
    call.outputs = {t};
    return issue(c10d::OpType::RECVANYSOURCE, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCCL::barrier(const c10d::BarrierOptions& opts) {
    Call call("barrier", blocking(opts));
    std::lock_guard<std::mutex> lock(issue_mu_);
    call.run([&](ccl_request_t* r) { return ccl_barrier(comm_, r); });
    return issue(c10d::OpType::BARRIER, call);
}

double ProcessGroupCCL::time_c_allreduce(at::Tensor& t, int iters) {
    TORCH_CHECK(t.is_contiguous() && t.device().is_cpu(), "ccl: a contiguous CPU tensor");
    Reduction red = reduction(t, c10d::ReduceOp(c10d::ReduceOp::SUM), "time_c_allreduce");
    std::lock_guard<std::mutex> lock(issue_mu_);
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
        ccl_result_t rc = ccl_allreduce(red.data, red.data, red.count, red.dtype, red.op, comm_,
                                        nullptr, nullptr);
        if (rc != CCL_SUCCESS) fail("allreduce", rc);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// ---- The world group and DeepSpeed-style ops -------------------------------------------------

namespace {

std::mutex g_world_mu;
std::optional<c10::weak_intrusive_ptr<ProcessGroupCCL>> g_world;

}  // namespace

void ProcessGroupCCL::set_world(const c10::intrusive_ptr<ProcessGroupCCL>& pg) {
    std::lock_guard<std::mutex> lock(g_world_mu);
    g_world.emplace(pg);
}

c10::intrusive_ptr<ProcessGroupCCL> ProcessGroupCCL::world() {
    std::lock_guard<std::mutex> lock(g_world_mu);
    return g_world ? g_world->lock() : c10::intrusive_ptr<ProcessGroupCCL>();
}

namespace {

// DeepSpeed's inference_all_reduce (deepspeed/comm): SUM over the default group, in place,
// blocking; as a torch op, so that torch.compile keeps it in the graph.
at::Tensor& inference_all_reduce_(at::Tensor& t) {
    auto pg = ProcessGroupCCL::world();
    TORCH_CHECK(pg,
                "ccl: inference_all_reduce works on the default process group, whose backend "
                "must be \"ccl\" (torch.distributed.init_process_group(\"ccl\"))");
    pg->allreduce_now(t, c10d::ReduceOp(c10d::ReduceOp::SUM));
    return t;
}

at::Tensor inference_all_reduce(const at::Tensor& t) {
    at::Tensor out = t.clone();
    inference_all_reduce_(out);
    return out;
}

// Shapes only (the Meta device, what torch.compile traces with).
at::Tensor& inference_all_reduce_meta_(at::Tensor& t) { return t; }
at::Tensor inference_all_reduce_meta(const at::Tensor& t) { return at::empty_like(t); }

// Functionalization (torch.compile's view of mutation): the in-place op as the out-of-place one
// on the unwrapped tensor, whose result then replaces the wrapped tensor's value.
at::Tensor& inference_all_reduce_functional_(at::Tensor& t) {
    namespace fn = at::functionalization::impl;
    TORCH_INTERNAL_ASSERT(fn::isFunctionalTensor(t));
    fn::sync(t);
    at::Tensor plain = fn::from_functional_tensor(t);
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("ccl::inference_all_reduce", "")
                         .typed<at::Tensor(const at::Tensor&)>();
    at::Tensor out;
    {
        at::AutoDispatchSkipFunctionalize skip;
        out = op.call(plain);
    }
    fn::replace_(t, out);
    fn::commit_update(t);
    fn::sync(t);
    return t;
}

}  // namespace

TORCH_LIBRARY(ccl, m) {
    m.def("inference_all_reduce_(Tensor(a!) self) -> Tensor(a!)");
    m.def("inference_all_reduce(Tensor self) -> Tensor");
}

TORCH_LIBRARY_IMPL(ccl, CPU, m) {
    m.impl("inference_all_reduce_", inference_all_reduce_);
    m.impl("inference_all_reduce", inference_all_reduce);
}

TORCH_LIBRARY_IMPL(ccl, Meta, m) {
    m.impl("inference_all_reduce_", inference_all_reduce_meta_);
    m.impl("inference_all_reduce", inference_all_reduce_meta);
}

TORCH_LIBRARY_IMPL(ccl, Functionalize, m) {
    m.impl("inference_all_reduce_", inference_all_reduce_functional_);
}

}  // namespace ccl_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    namespace py = pybind11;
    m.doc() = "ccl's torch.distributed backend; `import ccl_torch` registers it as \"ccl\"";
    py::module::import("torch.distributed");  // registers the base class with pybind
    py::class_<ccl_torch::ProcessGroupCCL, ccl_torch::BackendBase,
               c10::intrusive_ptr<ccl_torch::ProcessGroupCCL>>(m, "ProcessGroupCCL")
        .def(
            py::init<const c10::intrusive_ptr<c10d::Store>&, int, int, std::chrono::milliseconds>(),
            py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
            py::call_guard<py::gil_scoped_release>())
        .def(
            "allreduce_tensor",
            [](ccl_torch::ProcessGroupCCL& pg, at::Tensor t, const c10d::ReduceOp& op,
               const std::string& match_id,
               bool blocking) { return pg.allreduce_tensor(t, op, match_id, blocking); },
            py::arg("tensor"), py::arg("op"), py::arg("match_id"), py::arg("blocking"),
            py::call_guard<py::gil_scoped_release>())
        .def(
            "allreduce_now",
            [](ccl_torch::ProcessGroupCCL& pg, at::Tensor t, const c10d::ReduceOp& op) {
                pg.allreduce_now(t, op);
            },
            py::arg("tensor"), py::arg("op"), py::call_guard<py::gil_scoped_release>())
        .def("_time_c_allreduce", &ccl_torch::ProcessGroupCCL::time_c_allreduce, py::arg("tensor"),
             py::arg("iters"), py::call_guard<py::gil_scoped_release>());
    m.def("_set_world", &ccl_torch::ProcessGroupCCL::set_world);
    // Whether this torch tells backends about blocking calls (asyncOp): then they skip the work.
    m.attr("blocking_calls") = ccl_torch::HasAsyncOp<c10d::AllreduceOptions>::value;
    m.def("version", [] {
        int major = 0, minor = 0, patch = 0;
        ccl_get_version(&major, &minor, &patch);
        return py::make_tuple(major, minor, patch);
    });
}

// The PyTorch process-group backend "ccl": torch.distributed collectives on ccl communicators.
//
// One source for torch 1.13 (backends derive from c10d::ProcessGroup) and torch 2.x (they derive
// from c10d::Backend, which torch wraps in a ProcessGroup per device). setup.py passes the
// version it builds against as CCL_TORCH_VERSION_MAJOR.
//
// A collective whose caller will not wait asynchronously (torch 2.8+ says so in its options:
// asyncOp false, what `async_op=False` passes) runs as a blocking C call and returns a work that is
// already complete: the C path's cost plus a small object. Every other collective is started
// nonblocking through the C ABI and returns a CclWork that owns the ccl requests, keeps the
// tensors alive and, once the requests complete, runs the work's finish step (copying staged
// results back into non-contiguous or list outputs) and completes its future, made only when
// asked for. Whoever gets there first completes it: Work::wait on the caller's thread (the usual
// case, no thread hand-off), or the backend's completion thread once someone asked for the
// future (DDP's communication hooks chain on it without waiting).
#pragma once

#include <ccl/ccl.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#if CCL_TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

namespace ccl_torch {

#if CCL_TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

class Completer;

class CclWork : public c10d::Work {
public:
    CclWork(int rank, c10d::OpType type, std::vector<ccl_request_t> requests,
            std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep,
            std::function<void()> finish, std::shared_ptr<Completer> completer);
    ~CclWork() override;

    bool isCompleted() override;
    bool isSuccess() const override;
    std::exception_ptr exception() const override;
    std::vector<at::Tensor> result() override;
    bool wait(std::chrono::milliseconds timeout) override;
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
    int sourceRank() const override;  // a receive's sender, once complete

    // A receive's sender: `named`, or (any source) where ccl writes it as the receive completes.
    void set_source(int named, std::shared_ptr<int> any) {
        source_ = named;
        any_source_ = std::move(any);
    }

    // Waits for the requests, runs the finish step and completes the future; once.
    void complete();

private:
    void settle_future();  // completes the future, if one was made, once the work is done

    std::mutex complete_mu_;  // one thread at a time waits on the requests
    std::atomic<bool> done_{false};
    std::vector<ccl_request_t> requests_;
    std::vector<at::Tensor> outputs_;
    std::vector<at::Tensor> keep_;  // inputs and staging buffers ccl reads or writes
    std::function<void()> finish_;
    std::shared_ptr<Completer> completer_;
    std::mutex future_mu_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;  // made by getFuture
    int source_ = -1;
    std::shared_ptr<int> any_source_;
};

// Completes works in the background, for those whose future was asked for.
class Completer : public std::enable_shared_from_this<Completer> {
public:
    ~Completer();
    void add(c10::intrusive_ptr<CclWork> work);
    // Completes what is queued and ends the thread; later works complete on the caller's thread.
    void stop();

private:
    void run();
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<c10::intrusive_ptr<CclWork>> queue_;
    bool stop_ = false;
    std::thread thread_;
};

class ProcessGroupCCL : public BackendBase {
public:
    // Collective over the group: rank 0 serves a KVS whose address travels through `store`.
    ProcessGroupCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout);
    ~ProcessGroupCCL() override;

    const std::string getBackendName() const override { return "ccl"; }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                             const c10d::BroadcastOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                             const c10d::AllreduceOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
        std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                          const c10d::ReduceOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                             std::vector<at::Tensor>& inputs,
                                             const c10d::AllgatherOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> allgather_coalesced(
        std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
        const c10d::AllgatherOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::GatherOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                           std::vector<std::vector<at::Tensor>>& inputs,
                                           const c10d::ScatterOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                  std::vector<std::vector<at::Tensor>>& inputs,
                                                  const c10d::ReduceScatterOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
        at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                                 std::vector<int64_t>& output_splits,
                                                 std::vector<int64_t>& input_splits,
                                                 const c10d::AllToAllOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                            std::vector<at::Tensor>& inputs,
                                            const c10d::AllToAllOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                        int tag) override;
    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                        int tag) override;
    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                                 int tag) override;
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

    void setSequenceNumberForGroup() override { seq_ = 0; }
    uint64_t getSequenceNumberForGroup() override { return seq_; }

    // An allreduce of one tensor in place, with a ccl schedule cache entry under `match_id` when
    // it is not empty (DeepSpeed's all_reduce_caching); `blocking`: complete before returning.
    c10::intrusive_ptr<c10d::Work> allreduce_tensor(at::Tensor& t, const c10d::ReduceOp& op,
                                                    const std::string& match_id, bool blocking);
    // The same, blocking and without a work: the C call itself for a contiguous CPU tensor (the
    // DeepSpeed-style op's path, where every 100 ns shows).
    void allreduce_now(at::Tensor& t, const c10d::ReduceOp& op);

    // Seconds that `iters` blocking ccl_allreduce calls (SUM, in place) on this group's
    // communicator take, straight through the C ABI: the yardstick bench/torch_latency.py sets
    // torch's path against, in the same process and on the same tensor.
    double time_c_allreduce(at::Tensor& t, int iters);

    // The group DeepSpeed-style ops without a group argument work on (torch.ops.ccl.*): the
    // default process group, when its backend is ccl (ccl_torch sets it as it creates it).
    static void set_world(const c10::intrusive_ptr<ProcessGroupCCL>& pg);
    static c10::intrusive_ptr<ProcessGroupCCL> world();

private:
    struct Call;  // one collective being issued: its requests, tensors and finish step
    c10::intrusive_ptr<c10d::Work> issue(c10d::OpType type, Call& call);

    ccl_kvs_t kvs_ = nullptr;
    ccl_comm_t comm_ = nullptr;
    std::mutex issue_mu_;  // a ccl communicator takes calls from one thread at a time
    std::atomic<uint64_t> seq_{0};
    std::shared_ptr<Completer> completer_;
};

}  // namespace ccl_torch

// Progress workers: CCL_WORKER_COUNT threads per process that run nonblocking collectives while
// the application computes. A communicator's executions go to one worker and run there in issue
// order; a worker advances the executions of all its communicators side by side (each waits for
// its own peers), so ranks that interleave communicators differently never deadlock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/executor.h"

namespace ccl {

class WorkerPool {
public:
    // `cpus` is shared by the node's ranks: worker i of local rank r is pinned to
    // cpus[(r * count + i) % size]; empty leaves the workers to the OS. `crowded`: the node's
    // ranks and workers outnumber its cpus, so an idle worker must not spin.
    WorkerPool(int count, const std::vector<int>& cpus, int local_rank, bool crowded);
    // Finishes what is queued (every wait has a deadline), then joins.
    ~WorkerPool();
    WorkerPool(const WorkerPool&) = delete;
    WorkerPool& operator=(const WorkerPool&) = delete;

    size_t size() const { return workers_.size(); }
    // Queues `job` behind the earlier jobs of `queue` (a communicator id), on the worker that
    // serves that queue.
    // The worker holds it weakly: its owner keeps it until it has finished.
    void submit(uint64_t queue, std::weak_ptr<Execution> job);

private:
    struct Worker {
        std::mutex mu;
        std::condition_variable cv;
        std::vector<std::pair<uint64_t, std::weak_ptr<Execution>>> incoming;
        std::atomic<bool> has_incoming{false};  // lets a busy worker skip the lock
        bool stop = false;
        bool lingering = false;  // idle but looking at `incoming` every kTick: no notify needed
        std::thread thread;
    };
    static void run(Worker& w, bool crowded);

    std::vector<std::unique_ptr<Worker>> workers_;
};

// The process's pool, started on first use from CCL_WORKER_COUNT / CCL_WORKER_AFFINITY; never
// destroyed.
WorkerPool& workers();

}  // namespace ccl

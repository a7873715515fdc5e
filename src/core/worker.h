// Progress workers: CCL_WORKER_COUNT threads per process that run nonblocking collectives while
// the application computes. Each communicator's work goes to one worker, in order, which is what
// makes a communicator's collectives complete in issue order.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ccl {

class WorkerPool {
public:
    // `cpus`: pin worker i to cpus[i % size]; empty leaves them to the OS.
    WorkerPool(int count, const std::vector<int>& cpus);
    // Runs what is queued, then joins.
    ~WorkerPool();
    WorkerPool(const WorkerPool&) = delete;
    WorkerPool& operator=(const WorkerPool&) = delete;

    size_t size() const { return workers_.size(); }
    // Queues `task` on worker `index % size()`; tasks of one worker run in submission order.
    void submit(size_t index, std::function<void()> task);

private:
    struct Worker {
        std::mutex mu;
        std::condition_variable cv;
        std::deque<std::function<void()>> queue;
        bool stop = false;
        std::thread thread;
    };
    static void run(Worker& w, int cpu);

    std::vector<std::unique_ptr<Worker>> workers_;
};

// The process's pool, started on first use from CCL_WORKER_COUNT / CCL_WORKER_AFFINITY.
WorkerPool& workers();

}  // namespace ccl

#include "core/worker.h"

#include <hwloc.h>
#include <pthread.h>

#include "core/config.h"
#include "core/log.h"

namespace ccl {

namespace {

// Binds the calling thread to one cpu (an OS index) through hwloc; a failure is only logged.
void pin_to(int cpu) {
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0) return;
    if (hwloc_topology_load(topo) == 0) {
        hwloc_bitmap_t set = hwloc_bitmap_alloc();
        hwloc_bitmap_only(set, unsigned(cpu));
        if (hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_THREAD) != 0)
            log().warn("CCL_WORKER_AFFINITY: cannot pin a worker to cpu {}", cpu);
        else
            log().info("progress worker pinned to cpu {}", cpu);
        hwloc_bitmap_free(set);
    }
    hwloc_topology_destroy(topo);
}

}  // namespace

WorkerPool::WorkerPool(int count, const std::vector<int>& cpus) {
    for (int i = 0; i < count; ++i) {
        workers_.push_back(std::make_unique<Worker>());
        int cpu = cpus.empty() ? -1 : cpus[size_t(i) % cpus.size()];
        Worker& w = *workers_.back();
        w.thread = std::thread([&w, cpu] { run(w, cpu); });
    }
}

WorkerPool::~WorkerPool() {
    for (auto& w : workers_) {
        {
            std::lock_guard<std::mutex> lock(w->mu);
            w->stop = true;
        }
        w->cv.notify_one();
    }
    for (auto& w : workers_) w->thread.join();
}

void WorkerPool::submit(size_t index, std::function<void()> task) {
    Worker& w = *workers_[index % workers_.size()];
    {
        std::lock_guard<std::mutex> lock(w.mu);
        w.queue.push_back(std::move(task));
    }
    w.cv.notify_one();
}

void WorkerPool::run(Worker& w, int cpu) {
    pthread_setname_np(pthread_self(), "ccl-worker");
    if (cpu >= 0) pin_to(cpu);
    for (;;) {
        std::function<void()> task;
        {
            std::unique_lock<std::mutex> lock(w.mu);
            // An idle worker sleeps; submit() and the destructor wake it.
            w.cv.wait(lock, [&w] { return w.stop || !w.queue.empty(); });
            if (w.queue.empty()) return;  // stopping, and nothing left to run
            task = std::move(w.queue.front());
            w.queue.pop_front();
        }
        task();  // tasks report their own errors (through their requests); they do not throw
    }
}

WorkerPool& workers() {
    static WorkerPool pool(config().worker_count, config().worker_cpus);
    return pool;
}

}  // namespace ccl

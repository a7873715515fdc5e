#include "core/worker.h"

#include <hwloc.h>
#include <pthread.h>

#include <deque>
#include <map>

#include "core/config.h"
#include "core/log.h"
#include "shm/wait.h"

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

void WorkerPool::submit(uint64_t queue, std::unique_ptr<Execution> job) {
    Worker& w = *workers_[queue % workers_.size()];
    {
        std::lock_guard<std::mutex> lock(w.mu);
        w.incoming.emplace_back(queue, std::move(job));
    }
    w.cv.notify_one();
}

void WorkerPool::run(Worker& w, int cpu) {
    pthread_setname_np(pthread_self(), "ccl-worker");
    if (cpu >= 0) pin_to(cpu);
    // Per communicator, its executions in issue order; only the first of each runs.
    std::map<uint64_t, std::deque<std::unique_ptr<Execution>>> queues;
    int idle = 0;  // passes in a row that finished nothing
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(w.mu);
            // With nothing to run, sleep until submit() or the destructor calls.
            if (queues.empty())
                w.cv.wait(lock, [&w] { return w.stop || !w.incoming.empty(); });
            if (queues.empty() && w.incoming.empty()) return;  // stopping, all done
            for (auto& [queue, job] : w.incoming) queues[queue].push_back(std::move(job));
            w.incoming.clear();
        }
        bool finished = false;
        for (auto it = queues.begin(); it != queues.end();) {
            auto& q = it->second;
            while (!q.empty() && q.front()->progress()) {
                q.pop_front();
                finished = true;
            }
            it = q.empty() ? queues.erase(it) : std::next(it);
        }
        if (finished || queues.empty()) {
            idle = 0;
            continue;
        }
        // Everything waits for peers: spin briefly, then yield, then nap on one awaited flag (its
        // change, or a short timeout, wakes us; new submissions are seen at the next pass).
        ++idle;
        if (idle < 64) {
            shm::cpu_relax();
        } else if (idle < 128) {
            std::this_thread::yield();
        } else if (Waiter* waiter = queues.begin()->second.front()->waiting()) {
            waiter->sleep(std::chrono::microseconds(queues.size() > 1 ? 100 : 1000));
        }
    }
}

WorkerPool& workers() {
    static WorkerPool pool(config().worker_count, config().worker_cpus);
    return pool;
}

}  // namespace ccl

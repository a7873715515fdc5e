#include "core/worker.h"

#include <hwloc.h>
#include <pthread.h>

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <optional>

#include "base/config.h"
#include "base/immortal.h"
#include "base/log.h"
#include "base/team.h"
#include "base/wait.h"
#include "kvs/launcher.h"

namespace ccl {

namespace {

// Binds threads to cpus (OS indexes) through hwloc; failures are only logged.
class Pinner {
public:
    Pinner() {
        if (hwloc_topology_init(&topo_) == 0 && hwloc_topology_load(topo_) == 0) ok_ = true;
    }
    ~Pinner() { hwloc_topology_destroy(topo_); }
    void pin(std::thread& t, int cpu) {
        hwloc_bitmap_t set = hwloc_bitmap_alloc();
        hwloc_bitmap_only(set, unsigned(cpu));
        if (!ok_ || hwloc_set_thread_cpubind(topo_, t.native_handle(), set, 0) != 0)
            log().warn("CCL_WORKER_AFFINITY: cannot pin a progress worker to cpu {}", cpu);
        else
            log().info("progress worker pinned to cpu {}", cpu);
        hwloc_bitmap_free(set);
    }

private:
    hwloc_topology_t topo_{};
    bool ok_ = false;
};

}  // namespace

WorkerPool::WorkerPool(int count, const std::vector<int>& cpus, int local_rank, bool crowded) {
    std::optional<Pinner> pinner;
    if (!cpus.empty()) pinner.emplace();
    for (int i = 0; i < count; ++i) {
        workers_.push_back(std::make_unique<Worker>());
        Worker& w = *workers_.back();
        w.thread = std::thread([&w, crowded] { run(w, crowded); });
        if (pinner)
            pinner->pin(w.thread,
                        cpus[(size_t(local_rank) * size_t(count) + size_t(i)) % cpus.size()]);
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

void WorkerPool::submit(uint64_t queue, std::weak_ptr<Execution> job) {
    Worker& w = *workers_[queue % workers_.size()];
    {
        std::lock_guard<std::mutex> lock(w.mu);
        w.incoming.emplace_back(queue, std::move(job));
        w.has_incoming.store(true, std::memory_order_release);
        if (w.lingering) return;  // it looks within kTick (and the caller usually drives it)
    }
    w.cv.notify_one();
}

void WorkerPool::run(Worker& w, bool crowded) {
    using clock = std::chrono::steady_clock;
    // After its last job, a worker looks for new ones every kTick for kLinger before it sleeps
    // until woken: a job nobody waits for starts at most kTick late.
    constexpr auto kTick = std::chrono::microseconds(100);
    constexpr auto kLinger = std::chrono::milliseconds(20);
    pthread_setname_np(pthread_self(), "ccl-worker");
    team_for_this_thread(false);  // the application computes meanwhile (base/team.h)
    // Waiting for peers: poll (spin) while that is cheap, then yield, then nap on a flag. With
    // a core each, keep yielding for CCL_POLL_TIME_US as the ranks' own waits do (shm/wait.h: a
    // napping thread idles its virtual cpu, whose wake-up can take milliseconds on a busy host).
    const auto spin_for =
        crowded ? clock::duration::zero() : clock::duration(std::chrono::microseconds(50));
    const auto yield_for = crowded ? std::chrono::microseconds(200)
                                   : std::max(std::chrono::microseconds(200),
                                              std::chrono::microseconds(config().poll_time_us));
    // Per communicator, its executions in issue order; only the first of each runs.
    std::map<uint64_t, std::deque<std::weak_ptr<Execution>>> queues;
    clock::time_point idle_since{};  // when the passes that finish nothing began
    for (;;) {
        if (queues.empty() || w.has_incoming.load(std::memory_order_acquire)) {
            std::unique_lock<std::mutex> lock(w.mu);
            // With nothing to run, linger a while, then sleep until submit() or the destructor
            // calls. While it lingers, submit() wakes nobody: waking a thread on another cpu
            // costs a nonblocking call that is waited on at once (the common case, which the
            // caller drives itself) about 2 us on a virtual machine, as much as the call.
            if (queues.empty()) {
                w.lingering = true;
                const auto until = clock::now() + kLinger;
                while (!w.stop && w.incoming.empty() && clock::now() < until)
                    w.cv.wait_for(lock, kTick);
                w.lingering = false;
                w.cv.wait(lock, [&w] { return w.stop || !w.incoming.empty(); });
            }
            if (queues.empty() && w.incoming.empty()) return;  // stopping, all done
            for (auto& [queue, job] : w.incoming) queues[queue].push_back(std::move(job));
            w.incoming.clear();
            w.has_incoming.store(false, std::memory_order_relaxed);
        }
        bool finished = false;
        for (auto it = queues.begin(); it != queues.end();) {
            auto& q = it->second;
            // Gone: its owner let go of it, finished.
            for (std::shared_ptr<Execution> e;
                 !q.empty() && (!(e = q.front().lock()) || e->progress());) {
                q.pop_front();
                finished = true;
            }
            it = q.empty() ? queues.erase(it) : std::next(it);
        }
        if (finished || queues.empty()) {
            idle_since = {};
            continue;
        }
        // Everything waits for peers. A nap on one awaited flag ends when that flag changes or
        // after a short timeout; new submissions are seen at the next pass.
        auto now = clock::now();
        if (idle_since == clock::time_point{}) idle_since = now;
        if (now - idle_since < spin_for) {
            cpu_relax();
        } else if (now - idle_since < spin_for + yield_for) {
            std::this_thread::yield();
        } else {
            if (auto e = queues.begin()->second.front().lock())
                e->nap(std::chrono::microseconds(queues.size() > 1 ? 100 : 1000));
        }
    }
}

WorkerPool& workers() {
    // Never destroyed: communicators destroyed while the process exits (an atexit handler, a
    // static's destructor) may still have work queued, which the workers finish; they run until
    // the process ends.
    static WorkerPool& pool = immortal<WorkerPool>(
        config().worker_count, config().worker_cpus, kvs::process_launch().local_rank,
        kvs::process_launch().local_size * (1 + config().worker_count) > usable_cpus());
    return pool;
}

}  // namespace ccl

// A communicator: its ranks, its shared-memory arena, and the entry point of every collective:
// plan (or find the plan in a cache), then execute on the calling thread or queue for a worker.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "core/bootstrap.h"
#include "core/executor.h"
#include "core/request.h"
#include "core/schedule.h"
#include "core/topology.h"
#include "core/tuning.h"
#include "shm/arena.h"
#include "shm/mailbox.h"

namespace ccl {

namespace transport {
class Fabric;
}
// How a call wants to be run, from its attributes.
struct CallOptions {
    const char* match_id = nullptr;  // with to_cache: the cache key (the caller's, for the call)
    bool to_cache = false;
};

class Communicator : public std::enable_shared_from_this<Communicator>,
                     public ExecutionOwner,
                     private Deferral {
public:
    // Collective: every rank of the communicator calls it (in the same order for every
    // communicator created over one KVS). Sets up the shared memory through the KVS. The first
    // one binds a rank that nobody bound (CCL_BIND, core/binding.h).
    Communicator(int size, int rank, kvs::Client& kvs);
    // The same, with whatever bootstrap; `bind`: as above.
    Communicator(int size, int rank, Bootstrap& boot, bool bind = false);

    // ccl_comm_split: collective over this communicator. Null for CCL_UNDEFINED.
    std::shared_ptr<Communicator> split(int color, int key);
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;
    ~Communicator();

    int rank() const { return rank_; }
    int size() const { return size_; }
    uint64_t id() const { return id_; }  // unique in this process
    // The arena and mailbox of this node's ranks (all ranks when they share one node).
    shm::Arena& arena() { return *arena_; }
    shm::Mailbox& mailbox() { return *mailbox_; }
    const Topology& topology() const { return topo_; }
    // Whether the ranks span several nodes: then fabric() reaches every rank.
    bool multinode() const { return fabric_ != nullptr; }
    transport::Fabric& fabric() { return *fabric_; }
    std::string transports() const;                   // "shm", "shm+socket" or e.g. "shm+ofi(tcp;ofi_rxm)"
    const Config& config() const { return config_; }  // as it was when the communicator was made
    // This rank's share of the shared memory that the communicator's ranks on its node map: the
    // arena (two buffers and the small-message lanes per rank, flags) and the mailbox's channels.
    // Messages sent before their receive is posted go into further segments, made as needed.
    size_t shm_bytes() const {
        const size_t ranks = size_t(arena_->nranks());
        return (arena_->segment().size() + mailbox_->segment().size() + ranks - 1) / ranks;
    }
    // What algorithm choice needs of the communicator (core/tuning.h): its ranks, its node's,
    // and what single copy may carry (CCL_SINGLE_COPY on every rank and the probe at creation
    // worked between every pair of neighbours; the bounds derived from the probe).
    const tuning::Shape& shape() const { return shape_; }

    // The schedule for a call: from the match_id cache, a recent call's if the signature is
    // the same, else newly planned. Throws when the communicator is broken or on a cache mismatch.
    // The reference stays valid until this thread's next schedule_for (copy it to keep it).
    // A call site that repeats its match_id finds its schedule here, as an uncached call finds
    // a recent one: no lock, no lookup in the process's cache.
    const std::shared_ptr<const Schedule>& schedule_for(const CollSignature& sig,
                                                        const CallOptions& opts) {
        check_broken(false);  // run() or start() looks at the peers
        if (!opts.to_cache) {
            if (const auto& r = recent_[last_recent_]; r && r->sig == sig) [[likely]]
                return r;
        } else if (last_cached_ && last_cached_->sig == sig &&
                   std::strcmp(opts.match_id, last_cached_key_.c_str()) == 0) [[likely]] {
            return last_cached_;
        }
        return find_or_plan(sig, opts);
    }

    // Runs a schedule and returns when it is done: on this thread when none of this
    // communicator's work is queued, else behind the queued work. Sends never queue: they wait
    // for nobody (but a free descriptor) and touch only their own mailbox state.
    void run(const std::shared_ptr<const Schedule>& schedule, const Buffers& bufs);
    // A receive of at most shm::Mailbox::kQuickBytes from a co-located peer while none of this
    // communicator's work is queued (so that it cannot overtake an earlier receive), without a
    // plan or an execution: done at once when its message has arrived (Mailbox::try_recv).
    // Else, nonblocking (`req` given), it is deferred: *req's wait or test takes the message the
    // same way (any thread), and it becomes an execution only when the message is late (the
    // wait then blocks like any other: deadlines, failures) or when another call needs it in
    // issue order. *req gets the request, complete or deferred. False: nothing happened; plan
    // and run the call.
    bool recv_now(const CollSignature& sig, const Buffers& bufs, std::shared_ptr<Request>* req);
    // A send that goes inline (at most shm::Mailbox::kSpanMax) to a co-located peer, at once and
    // without a plan, where it needs no wait (Mailbox::try_send). Sends never queue, so it may
    // overtake queued work. False: nothing happened; plan and run the call.
    bool send_now(const CollSignature& sig, const Buffers& bufs);
    // Plans and runs a blocking call made from inside ccl.
    void run(const CollSignature& sig, const Buffers& bufs);
    // Queues a schedule on this communicator's worker; every request in `reqs` completes with its
    // result.
    void start(std::shared_ptr<const Schedule> schedule, const Buffers& bufs, RequestList reqs);
    // Returns once none of this communicator's work is queued or running (user thread).
    void wait_idle();

    // Throws if an earlier failure broke the communicator. With `peers`, also if another rank
    // reported a failure in shared memory (blocking calls and sends: a nonblocking call finds it
    // at its first step and reports it through its request, as nonblocking calls do).
    void check_broken(bool peers = true) {
        if (!is_broken_.load(std::memory_order_acquire) && !(peers && arena_->any_failure()))
            [[likely]]
            return;
        check_broken_slow(peers);
    }

    // ccl_comm_abort, from any thread: breaks the communicator with CCL_ERROR_ABORTED, makes
    // every pending wait of this rank fail with it (its peers' with CCL_ERROR_PEER_FAILURE) and
    // removes the names of this rank's unreceived messages. Idempotent.
    void abort();
    // ccl_comm_get_async_error, from any thread: the error that broke the communicator (seen by
    // a progress worker, a blocking call or abort on this rank, or reported by a peer through
    // shared memory), or CCL_SUCCESS. `message` gets its description.
    ccl_result_t async_error(std::string* message);

private:
    void check_broken_slow(bool peers);
    // schedule_for's other cases: the match_id cache, the other recent schedules, a new plan.
    const std::shared_ptr<const Schedule>& find_or_plan(const CollSignature& sig,
                                                        const CallOptions& opts);
    void execute_now(const Schedule& schedule, const Buffers& bufs);
    // Marks the communicator broken if the arena failed; `p2p`: the failed call was a send or
    // receive (a mismatched receive leaves the communicator usable).
    void note_failure(const Error& e, bool p2p = true);
    // Collective, at creation: fails (CCL_ERROR_INVALID_USAGE, naming the variable) where ranks
    // were given different settings that choose algorithms.
    void check_settings_agree();
    // A launch's communicator sizes the process's team (base/team.h), before its arena, and sets
    // where single-copy transfers are cut: a split's ranks keep their parent's.
    void configure_team();
    // Collective, at creation: what single copy may carry, every rank's team (base/team.h) known.
    tuning::SingleCopy probe_single_copy();
    shm::WaitPolicy wait_policy() const;  // how this node's ranks wait (shm/wait.h)
    // Maps this node's segments (and, across nodes, opens the fabric endpoint); collective.
    void setup_single_node(Bootstrap& boot, size_t buffer_size);
    void setup_multinode(Bootstrap& boot, size_t buffer_size);
    std::vector<int> remote_ranks() const;  // the ranks on other nodes

    const uint64_t id_;
    int size_;
    int rank_;
    Config config_;
    std::optional<shm::Arena> arena_;
    std::optional<shm::Mailbox> mailbox_;
    Topology topo_;
    std::unique_ptr<transport::Fabric> fabric_;  // only across nodes
    tuning::Shape shape_;
    // The last few uncached calls' plans (caller's thread only): loops that alternate a few
    // calls (send and recv, allreduce and broadcast) plan each once.
    std::array<std::shared_ptr<const Schedule>, 8> recent_;
    size_t next_recent_ = 0;
    size_t last_recent_ = 0;                       // the one found last: looked at first
    std::shared_ptr<const Schedule> last_cached_;  // the match_id cache's last answer
    std::string last_cached_key_;                  // and its match_id
    std::set<const char*> logged_;  // algorithm choices reported at info (caller only)
    CollSignature last_recv_{CollType::recv, 0, CCL_UINT8};  // recv_now's last (caller only)
    uint32_t last_recv_digest_ = last_recv_.p2p_digest();
    CollSignature last_send_{CollType::send, 0, CCL_UINT8};  // send_now's last (caller only)
    uint32_t last_send_digest_ = last_send_.p2p_digest();

    // Hands a parked receive to the worker, and a deferred one too, made an execution first.
    void unpark();
    // The deferred receive (see Deferral).
    bool try_complete(Request& r) override;
    void materialize(Request& r) override;
    // A deferred receive (recv_now): its request (user thread) and, guarded by that request's
    // lock until it is resolved, what resolving it needs and the execution it became, if any.
    std::shared_ptr<Request> deferred_;
    CollSignature deferred_sig_{CollType::recv, 0, CCL_UINT8};
    void* deferred_buf_ = nullptr;
    uint32_t deferred_digest_ = 0;
    std::shared_ptr<Execution> deferred_exec_;

    // An execution this communicator started has finished: its requests complete.
    void finished(Execution& e, ccl_result_t code, const std::string& message) override;

    // Queues an execution on the worker, which holds it weakly: inflight_ owns it.
    void hand_to_worker(std::shared_ptr<Execution> exec);
    void release_finished();  // lets go of the finished executions at the front of inflight_
    std::deque<std::shared_ptr<Execution>> inflight_;  // handed to the worker (user thread only)
    std::shared_ptr<Execution> last_started_;  // the previous queued execution (user thread only)
    // A posted receive no worker has been given yet (user thread only; see start).
    std::shared_ptr<Execution> parked_;
    // Work queued and not finished; wait_idle sleeps on it (futex). Not std::atomic::wait:
    // libstdc++'s notify_all does a locked add on a global line at every call.
    std::atomic<uint32_t> pending_{0};
    std::atomic<uint32_t> idle_waiters_{0};
    // Nothing queued or running and no deferred receive unresolved: a call may run on this
    // thread. The deferral first: one made an execution counted in pending_ before it was
    // undeferred.
    bool idle() const {
        return !(deferred_ && deferred_->still_deferred()) &&
               pending_.load(std::memory_order_acquire) == 0;
    }
    std::atomic<bool> is_broken_{false};
    std::mutex mu_;  // guards broken_
    std::optional<Error> broken_;
};

}  // namespace ccl

// A communicator's creation (the parts of it: comm_setup.cpp, comm_probe.cpp), split, and the
// plans of its calls. Its failures: comm_failure.cpp; its execution queue: comm_queue.cpp.
#include "core/comm.h"

#include <algorithm>

#include "base/config.h"
#include "base/log.h"
#include "base/reduce.h"
#include "base/team.h"
#include "core/binding.h"
#include "core/planner.h"
#include "core/schedule_cache.h"
#include "core/worker.h"
#include "transport/fabric.h"

namespace ccl {

namespace {

std::atomic<uint64_t> next_comm_id{1};  // communicator ids, never reused

}  // namespace

Communicator::Communicator(int size, int rank, kvs::Client& kvs)
    : Communicator(size, rank, *kvs_bootstrap(kvs, size, rank), true) {}

Communicator::Communicator(int size, int rank, Bootstrap& boot, bool bind)
    : id_(next_comm_id++), size_(size), rank_(rank), config_(ccl::config()) {
    if (bind) log_rank(rank);  // a job's communicator, not one split from another
    topo_ = Topology(boot.allgather(node_record(config_)), rank);
    // Before the workers start and the arena is mapped, so that both land on the rank's cpus.
    if (bind && config_.bind)
        if (std::string what = bind_if_unbound(topo_.local_rank(), topo_.local_size());
            !what.empty())
            log().info("rank {}: {}", rank, what);
    if (bind) configure_team();  // before the arena, whose buffers it sizes
    const size_t buffer = tuning::arena_buffer_bytes(config_.shm_buffer_size,
                                                     config_.shm_buffer_size_set, team_size());
    if (topo_.nnodes() == 1)
        setup_single_node(boot, buffer);
    else
        setup_multinode(boot, buffer);
    shape_ = {size_, arena_->nranks(), arena_->buffer_size(), multinode(), {}};
    check_settings_agree();
    shape_.copy = probe_single_copy();
    recent_ = {};  // planned before single copy was known
    workers();     // started now, so that the first nonblocking call does not pay for it
    log().info(
        "rank {}/{}: communicator ready, {} node(s), transport {} ({} KiB per buffer, single "
        "copy {}), {} kernels, {} local rank(s) on {} cpu(s): {} waits",
        rank, size, topo_.nnodes(), transports(), arena_->buffer_size() >> 10,
        shape_.copy.on ? "on" : "off", isa_name(reduce_isa()), topo_.local_size(),
        topo_.node_cpus(), arena_->policy().own_core ? "spinning" : "yielding");
}

Communicator::~Communicator() {
    // ccl_comm_destroy resolved it (wait_idle); this is for any other way of going away.
    if (deferred_) {
        deferred_->exclude_owner();
        auto lock = deferred_->lock();
        if (deferred_->deferred()) {
            deferred_->undefer();
            deferred_->complete(CCL_ERROR_INVALID_USAGE,
                                "the communicator was destroyed before the receive completed");
        }
    }
}

std::vector<int> Communicator::remote_ranks() const {
    std::vector<int> r;
    for (int i = 0; i < size_; ++i)
        if (topo_.node_of(i) != topo_.node()) r.push_back(i);
    return r;
}

std::string Communicator::transports() const {
    return fabric_ ? "shm+" + fabric_->provider() : "shm";
}

std::shared_ptr<Communicator> Communicator::split(int color, int key) {
    std::vector<int32_t> mine{color, key}, all(2 * size_t(size_));
    run({CollType::allgather, 2, CCL_INT32, CCL_SUM, 0}, {mine.data(), all.data(), {}});
    std::vector<int> members;  // parent ranks of my color, in their new order
    for (int r = 0; r < size_; ++r)
        if (color != CCL_UNDEFINED && all[2 * size_t(r)] == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(),
                     [&](int a, int b) { return all[2 * size_t(a) + 1] < all[2 * size_t(b) + 1]; });
    ParentBootstrap boot(*this, members.empty() ? -1 : members[0], members);
    if (members.empty()) {
        boot.finish();  // takes part in the other colors' bootstrap
        check_broken();
        return nullptr;
    }
    int new_rank = int(std::find(members.begin(), members.end(), rank_) - members.begin());
    try {
        return std::make_shared<Communicator>(int(members.size()), new_rank, boot);
    } catch (const Error&) {
        boot.finish();
        throw;
    }
}

const std::shared_ptr<const Schedule>& Communicator::find_or_plan(const CollSignature& sig,
                                                                  const CallOptions& opts) {
    if (opts.to_cache) {
        last_cached_ = schedule_cache().find(opts.match_id, id_, sig);
        if (last_cached_) {
            last_cached_key_ = opts.match_id;
            return last_cached_;
        }
    } else {
        for (size_t i = 0; i < recent_.size(); ++i)
            if (recent_[i] && recent_[i]->sig == sig) {
                last_recent_ = i;
                return recent_[i];
            }
    }
    auto schedule = std::make_shared<const Schedule>(plan(*this, sig));
    // Report each algorithm once (step names are literals: their addresses identify them).
    const char* first = schedule->steps.empty() ? "none" : schedule->steps.front().name;
    if (logged_.insert(first).second)
        log().info("rank {}/{}: {} uses {}", rank_, size_, coll_name(sig.coll),
                   schedule->algorithm());
    if (opts.to_cache) {
        schedule_cache().insert(opts.match_id, id_, schedule);
        last_cached_ = std::move(schedule);
        last_cached_key_ = opts.match_id;
        return last_cached_;
    }
    last_recent_ = next_recent_++ % recent_.size();
    recent_[last_recent_] = std::move(schedule);
    return recent_[last_recent_];
}

}  // namespace ccl

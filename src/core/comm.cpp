#include "core/comm.h"

#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cctype>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>

#include "base/config.h"
#include "base/log.h"
#include "base/reduce.h"
#include "core/binding.h"
#include "core/executor.h"
#include "core/planner.h"
#include "core/schedule_cache.h"
#include "core/worker.h"
#include "kvs/kvs.h"
#include "shm/cma.h"
#include "shm/wait.h"
#include "transport/fabric.h"

namespace ccl {

namespace {

// Communicators created over one KVS are told apart by their creation order, which every rank
// shares (creation is collective); the counter is per KVS address and process.
std::string next_prefix(const std::string& kvs_address, int size) {
    static std::mutex mu;
    static std::map<std::string, int> created;
    std::lock_guard<std::mutex> lock(mu);
    return "comm" + std::to_string(created[kvs_address + "/" + std::to_string(size)]++) + "-n" +
           std::to_string(size) + "/";
}

std::string segment_name() {
    std::random_device rd;
    std::ostringstream s;
    s << "/ccl-" << ::getpid() << "-" << std::hex << (uint64_t(rd()) << 32 | rd());
    return s.str();
}

std::atomic<uint64_t> next_comm_id{1};  // communicator ids, never reused

// Shares through the KVS: rank 0 puts, the others get.
class KvsBootstrap final : public Bootstrap {
public:
    KvsBootstrap(kvs::Client& kvs, int size, int rank)
        : kvs_(kvs), prefix_(next_prefix(kvs.address(), size)), size_(size), rank_(rank) {}
    std::string from_root(const std::string& value) override {
        if (rank_ != 0) return kvs_.get(prefix_ + "shm", config().kvs_timeout_s);
        kvs_.put(prefix_ + "shm", value);
        return value;
    }
    std::vector<std::string> allgather(const std::string& value) override {
        const std::string key = prefix_ + "all" + std::to_string(rounds_++) + "/";
        kvs_.put(key + std::to_string(rank_), value);
        std::vector<std::string> all(static_cast<size_t>(size_));
        for (int r = 0; r < size_; ++r)
            all[size_t(r)] =
                r == rank_ ? value : kvs_.get(key + std::to_string(r), config().kvs_timeout_s);
        return all;
    }
    void barrier() override { kvs_.barrier(prefix_ + "mapped", size_, config().kvs_timeout_s); }

private:
    kvs::Client& kvs_;
    int rounds_ = 0;
    std::string prefix_;
    int size_, rank_;
};

// Shares over the parent of a split: every parent rank makes the same calls, whatever its color,
// and gets its own group's root's value (root < 0: none).
class ParentBootstrap final : public Bootstrap {
public:
    ParentBootstrap(Communicator& parent, int root, std::vector<int> members)
        : parent_(parent), root_(root), members_(std::move(members)) {}
    std::string from_root(const std::string& value) override {
        std::vector<std::string> all = exchange(value);
        return root_ < 0 ? std::string() : all[size_t(root_)];
    }
    std::vector<std::string> allgather(const std::string& value) override {
        std::vector<std::string> all = exchange(value), mine;
        for (int r : members_) mine.push_back(all[size_t(r)]);
        return mine;
    }
    void barrier() override {
        synced_ = true;
        parent_.run(CollSignature{}, {});
    }
    // The calls a failed constructor did not get to, so that no other rank waits for them.
    void finish() noexcept {
        try {
            while (exchanges_ < 2) exchange("");
            if (!synced_) barrier();
        } catch (const Error&) {  // the parent is broken: the others see that too
        }
    }

private:
    // Every parent rank's value, by parent rank.
    std::vector<std::string> exchange(const std::string& value) {
        ++exchanges_;
        constexpr size_t kRecord = 512;
        if (value.size() >= kRecord)
            throw Error(
                CCL_ERROR_INTERNAL,
                "a bootstrap record of " + std::to_string(value.size()) + " bytes is too long");
        std::vector<char> mine(kRecord, 0), all(kRecord * size_t(parent_.size()));
        value.copy(mine.data(), kRecord - 1);
        parent_.run({CollType::allgather, kRecord, CCL_UINT8, CCL_SUM, 0},
                    {mine.data(), all.data(), {}});
        std::vector<std::string> out;
        for (int r = 0; r < parent_.size(); ++r) out.emplace_back(all.data() + size_t(r) * kRecord);
        return out;
    }

    Communicator& parent_;
    int root_;                  // the parent rank of the group's rank 0, or -1
    std::vector<int> members_;  // parent ranks of the group, in new rank order
    int exchanges_ = 0;
    bool synced_ = false;
};

std::unique_ptr<Bootstrap> kvs_bootstrap(kvs::Client& kvs, int size, int rank) {
    return std::make_unique<KvsBootstrap>(kvs, size, rank);
}

// Threads per large single-copy transfer (shm::cma_parallel, tuning::cma_threads).
int cma_threads_wanted(const Config& c, const Topology& t) {
    cpu_set_t mine;
    const int own = sched_getaffinity(0, sizeof(mine), &mine) == 0 ? CPU_COUNT(&mine) : 1;
    return tuning::cma_threads(c.cma_threads, own, t.node_cpus(), t.local_size());
}

}  // namespace

Communicator::Communicator(int size, int rank, kvs::Client& kvs)
    : Communicator(size, rank, *kvs_bootstrap(kvs, size, rank), true) {}

Communicator::Communicator(int size, int rank, Bootstrap& boot, bool bind)
    : id_(next_comm_id++), size_(size), rank_(rank), config_(ccl::config()) {
    topo_ = Topology(boot.allgather(node_record(config_)), rank);
    // Before the workers start and the arena is mapped, so that both land on the rank's cpus.
    if (bind && config_.bind)
        if (std::string what = bind_if_unbound(topo_.local_rank(), topo_.local_size());
            !what.empty())
            log().info("rank {}: {}", rank, what);
    if (topo_.nnodes() == 1)
        setup_single_node(boot);
    else
        setup_multinode(boot);
    shape_ = {size_, arena_->nranks(), arena_->buffer_size(), multinode(), {}};
    check_settings_agree();
    // A launch's communicator sets the process's threads per transfer; a split's ranks are its
    // parent's.
    const int threads = bind ? cma_threads_wanted(config_, topo_) : shm::cma_threads();
    shape_.copy = probe_single_copy(threads);
    if (bind && shape_.copy.on) {
        shm::cma_parallel(threads, config_.cma_slice,
                          std::chrono::microseconds(config_.poll_time_us));
        if (threads > 1 && rank == 0)
            log().info("single-copy transfers of {} KiB or more: {} threads each",
                       config_.cma_slice >> 10, threads);
    }
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
    return fabric_ ? "shm+ofi(" + fabric_->provider() + ")" : "shm";
}

namespace {

// What a node's first rank tells the others about the segments it made: "name size job".
struct ShmRecord {
    std::string name;
    size_t buffer_size = 0;
    shm::JobId job{};
};

ShmRecord parse_shm_record(std::istream& in, const std::string& text) {
    ShmRecord r;
    std::string job_hex;
    in >> r.name >> r.buffer_size >> job_hex;
    auto job = kvs::parse_secret_hex(job_hex);
    if (!job || r.name.empty())
        throw Error(CCL_ERROR_INTERNAL,
                    "the bootstrap record for shared memory '" + text + "' is malformed");
    r.job = *job;
    return r;
}

// The node's first rank lays out the arena and mailbox of `nranks` ranks; returns the record
// ("name buffer_size job") the others open them by.
std::string create_segments(std::optional<shm::Arena>& arena, std::optional<shm::Mailbox>& mailbox,
                            int nranks, size_t buffer_size, double timeout_s,
                            shm::WaitPolicy policy) {
    shm::remove_stale_segments_now_and_then();  // left by a job killed while it started
    std::string name = segment_name();
    // The segments' job id travels with their names: a segment that does not carry it (stale,
    // foreign, replaced) is refused when the others open it.
    shm::JobId job = kvs::random_secret();
    arena.emplace(shm::Segment::create(name, shm::Arena::bytes_needed(nranks, buffer_size), job),
                  nranks, 0, buffer_size, timeout_s, true, policy, describe_round);
    mailbox.emplace(shm::Segment::create(name + "-m", shm::Mailbox::bytes_needed(nranks), job),
                    name + "-d", *arena);
    return name + " " + std::to_string(buffer_size) + " " + kvs::secret_hex(job);
}

void open_segments(std::optional<shm::Arena>& arena, std::optional<shm::Mailbox>& mailbox,
                   const ShmRecord& r, int nranks, int rank, double timeout_s,
                   shm::WaitPolicy policy) {
    arena.emplace(
        shm::Segment::open(r.name, shm::Arena::bytes_needed(nranks, r.buffer_size), r.job), nranks,
        rank, r.buffer_size, timeout_s, false, policy, describe_round);
    mailbox.emplace(shm::Segment::open(r.name + "-m", shm::Mailbox::bytes_needed(nranks), r.job),
                    r.name + "-d", *arena);
}

}  // namespace

void Communicator::setup_single_node(Bootstrap& boot) {
    const Config& cfg = config_;
    size_t buffer_size = cfg.shm_buffer_size;
    std::string shared;
    // Lay the segments out before publishing their name: a peer may map them at once.
    if (rank_ == 0)
        shared =
            create_segments(arena_, mailbox_, size_, buffer_size, cfg.timeout_s, wait_policy());
    std::string text = boot.from_root(shared);
    if (rank_ != 0) {
        std::istringstream in(text);
        open_segments(arena_, mailbox_, parse_shm_record(in, text), size_, rank_, cfg.timeout_s,
                      wait_policy());
    }
    // Once every rank has mapped the segments their names can go: nothing is left in /dev/shm,
    // whatever happens to the processes later.
    boot.barrier();
    if (rank_ == 0) {
        arena_->segment().unlink();
        mailbox_->segment().unlink();
    }
}

void Communicator::setup_multinode(Bootstrap& boot) {
    const Config& cfg = config_;
    const int local_size = topo_.local_size(), local_rank = topo_.local_rank();
    const bool leader = local_rank == 0;
    // Every rank publishes its endpoint's address, or why it has none (so that all fail alike,
    // naming the provider, rather than wait for it); each node's first rank also publishes its
    // node's segments.
    std::string record;
    try {
        fabric_ = std::make_unique<transport::Fabric>(rank_, size_, cfg.timeout_s);
        record = fabric_->name_hex();
    } catch (const Error& e) {
        std::string why = e.what();
        for (char& c : why)
            if (std::isspace(static_cast<unsigned char>(c))) c = '_';
        record = "!" + why.substr(0, 400);
    }
    size_t buffer_size = cfg.shm_buffer_size;
    if (leader)
        record += " " + create_segments(arena_, mailbox_, local_size, buffer_size, cfg.timeout_s,
                                        wait_policy());
    std::vector<std::string> all = boot.allgather(record);
    std::vector<std::string> names;
    for (int r = 0; r < size_; ++r) {
        std::istringstream in(all[size_t(r)]);
        std::string name;
        in >> name;
        if (name.empty() || name[0] == '!') {
            std::string why = name.empty() ? std::string("no record") : name.substr(1);
            std::replace(why.begin(), why.end(), '_', ' ');
            throw Error(CCL_ERROR_UNSUPPORTED,
                        "rank " + std::to_string(r) +
                            " could not open its libfabric endpoint, which ranks on several "
                            "nodes need: " +
                            why);
        }
        names.push_back(name);
    }
    fabric_->connect(names);
    fabric_->connect_all();
    if (!leader) {
        const std::string& text = all[size_t(topo_.leader(topo_.node()))];
        std::istringstream in(text);
        std::string skip;
        in >> skip;
        open_segments(arena_, mailbox_, parse_shm_record(in, text), local_size, local_rank,
                      cfg.timeout_s, wait_policy());
    }
    boot.barrier();
    if (leader) {
        arena_->segment().unlink();
        mailbox_->segment().unlink();
    }
    arena_->set_comm_ranks(topo_.ranks_of(topo_.node()));
    // A notice from another node breaks this node's arena too, with the notice's code.
    fabric_->set_on_remote_failure(
        [arena = &*arena_](ccl_result_t code) { arena->mark_failed(code); });
    // A fabric wait stops early when a co-located peer reported a failure.
    fabric_->set_failure_check([arena = &*arena_] {
        std::string message;
        ccl_result_t code = arena->peer_failure(&message);
        if (code != CCL_SUCCESS) throw Error(code, message);
        if (arena->failed()) throw Error(arena->failure_code(), "the communicator failed");
    });
}

shm::WaitPolicy Communicator::wait_policy() const {
    return shm::wait_policy(topo_.local_size(), topo_.node_cpus(),
                            std::chrono::microseconds(config_.poll_time_us));
}

namespace {

// The settings that choose algorithms: ranks given different ones would choose differently for
// one call and fail it as a mismatch that names no variable, so a communicator compares them
// once. Each as one word: a size (kUnset where the user gave none and its default follows the
// node), or a name of up to 8 letters.
constexpr uint64_t kUnset = UINT64_MAX;
struct Setting {
    const char* name;
    uint64_t value;
    bool is_name;
};
std::vector<Setting> choosing_settings(const Config& c) {
    uint64_t algo = 0;
    std::memcpy(&algo, c.allreduce_algo.data(), std::min<size_t>(8, c.allreduce_algo.size()));
    return {
        {"CCL_ALLREDUCE", algo, true},
        {"CCL_ALLREDUCE_DIRECT_MAX", c.allreduce_direct_max_set ? c.allreduce_direct_max : kUnset,
         false},
        {"CCL_ALLREDUCE_CMA_MIN", c.allreduce_cma_min, false},
        {"CCL_ALLREDUCE_CMA_MAX", c.allreduce_cma_max_set ? c.allreduce_cma_max : kUnset, false},
        {"CCL_FABRIC_PIPELINE_CHUNK", c.fabric_pipeline_chunk, false},
        {"CCL_ZE_PIPELINE_CHUNK", c.ze_pipeline_chunk, false}};
}
std::string shown(const Setting& s, uint64_t value) {
    if (s.is_name) {
        char text[9] = {};
        std::memcpy(text, &value, 8);
        return std::string("'") + text + "'";
    }
    return value == kUnset ? std::string("unset") : std::to_string(value);
}

}  // namespace

void Communicator::check_settings_agree() {
    if (size_ == 1) return;
    const std::vector<Setting> mine = choosing_settings(config_);
    const size_t k = mine.size();
    std::vector<uint64_t> values(k), all(k * size_t(size_));
    for (size_t i = 0; i < k; ++i) values[i] = mine[i].value;
    run({CollType::allgather, k, CCL_UINT64, CCL_SUM, 0}, {values.data(), all.data(), {}});
    for (size_t i = 0; i < k; ++i)
        for (int r = 1; r < size_; ++r)
            if (const uint64_t v = all[size_t(r) * k + i]; v != all[i])
                throw Error(CCL_ERROR_INVALID_USAGE,
                            std::string(mine[i].name) + " differs between ranks: " +
                                shown(mine[i], all[i]) + " on rank 0, " + shown(mine[i], v) +
                                " on rank " + std::to_string(r) +
                                "; every rank must be given the same (it chooses algorithms)");
}

tuning::SingleCopy Communicator::probe_single_copy(int cma_threads) {
    if (size_ == 1) return {};
    // Every rank reads a word of the next rank's memory; all must succeed (and want it).
    const int64_t word = 0x63636c;
    std::vector<int64_t> mine{::getpid(), int64_t(reinterpret_cast<intptr_t>(&word))};
    std::vector<int64_t> all(2 * size_t(size_));
    run({CollType::allgather, 2, CCL_INT64, CCL_SUM, 0}, {mine.data(), all.data(), {}});
    // The next rank on this node (single copy is for co-located ranks only).
    const auto& node = topo_.ranks_of(topo_.node());
    size_t next = size_t(node[size_t(topo_.local_rank() + 1) % node.size()]);
    const double ns =
        config_.single_copy
            ? shm::cma_probe(pid_t(all[2 * next]),
                             reinterpret_cast<const void*>(intptr_t(all[2 * next + 1])),
                             sizeof(word))
            : -1;
    // The cost of a byte, the kernel's copy against memcpy (shm::cma_copy_costs), among this
    // node's ranks: 256 KiB, a size that stays in the caches, where most transfers are.
    double kernel_ns = -1, user_ns = -1;
    if (arena_->nranks() > 1)
        shm::cma_copy_costs(*arena_, CollSignature{}.round(Algo::copy_costs),
                            std::min(arena_->buffer_size(), size_t(256) << 10), 3,
                            config_.single_copy, &kernel_ns, &user_ns)
            .run_blocking();
    const uint64_t per_byte =
        kernel_ns > 0 && user_ns > 0 ? uint64_t(100 * kernel_ns / user_ns) : 0;
    // One allreduce (max) agrees on all of it, so that every rank chooses alike (an all-to-all's
    // ranks each decide for all): whether any rank failed, the fastest probe (noise only adds to
    // one; as its complement), the largest CCL_CMA_MIN, CCL_ALLGATHER_CMA_MAX and
    // CCL_ALLTOALL_CMA_MAX given, the largest floor of a node with more ranks than cpus (none
    // where a node's cpus are unknown), the dearest and cheapest byte (the cheapest as its
    // complement), and whether any rank copies large transfers on one thread.
    uint64_t vote[9] = {ns < 0,
                        ~(ns < 0 ? UINT64_MAX : uint64_t(ns)),
                        config_.cma_min,
                        config_.allgather_cma_max,
                        config_.alltoall_cma_max,
                        tuning::crowded_cma_min_bytes(0, topo_.local_size(), topo_.node_cpus()),
                        per_byte,
                        ~per_byte,
                        uint64_t(cma_threads < 2)},
             agreed[9];
    run({CollType::allreduce, 9, CCL_UINT64, CCL_MAX, 0}, {vote, agreed, {}});
    tuning::Probe p;
    p.works = agreed[0] == 0;
    p.fixed_ns = double(~agreed[1]);
    p.cma_min = size_t(agreed[2]);
    p.allgather_cma_max = size_t(agreed[3]);
    p.alltoall_cma_max = size_t(agreed[4]);
    p.crowd_floor = size_t(agreed[5]);
    p.dearest_x100 = agreed[6];
    p.cheapest_x100 = ~agreed[7];
    p.threaded = agreed[8] == 0;
    const tuning::SingleCopy copy = tuning::single_copy(p, topo_.local_size(), topo_.node_cpus());
    if (!p.works && config_.single_copy && rank_ == 0)
        log().info(
            "single-copy transfers (process_vm_readv) are not allowed here: ptrace "
            "restrictions or a seccomp profile; using shared-memory copies only");
    if (p.works && rank_ == 0) log().info("{}", tuning::describe(p, copy));
    return copy;
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

void Communicator::check_broken_slow(bool peers) {
    if (!is_broken_.load(std::memory_order_acquire)) {
        if (!peers) return;
        // A peer that failed (or aborted) said so in shared memory: fail now rather than at the
        // first wait, which calls that need not wait (a send, a receive already posted) never do.
        std::string message;
        ccl_result_t code = arena_->peer_failure(&message);
        if (code == CCL_SUCCESS) return;
        arena_->mark_failed(code);
        note_failure(Error(code, message));
    }
    std::lock_guard<std::mutex> lock(mu_);
    throw Error(broken_->code(),
                std::string("communicator is broken by an earlier failure: ") + broken_->what());
}

const std::shared_ptr<const Schedule>& Communicator::find_or_plan(const CollSignature& sig,
                                                                  const CallOptions& opts) {
    if (opts.to_cache) {
        last_cached_ = schedule_cache().find(opts.match_id, id_, sig);
        if (last_cached_) return last_cached_;
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
        return last_cached_;
    }
    last_recent_ = next_recent_++ % recent_.size();
    recent_[last_recent_] = std::move(schedule);
    return recent_[last_recent_];
}

void Communicator::note_failure(const Error& e, bool p2p) {
    // A failure in the middle of a call leaves the ranks out of step like a failed wait: a dead
    // peer seen outside the arena's waits, a wait that timed out, a copy the kernel refused (a
    // single-copy transfer into or out of a bad buffer) or memory that could not be had. Make the
    // peers see it at once rather than at their deadline. So does a collective whose fabric
    // message had another size than its receive: across nodes only the receiving rank sees such a
    // disagreement (shared memory's own check fails the arena itself).
    const ccl_result_t code = e.code();
    if (code == CCL_ERROR_PEER_FAILURE || code == CCL_ERROR_TIMEOUT || code == CCL_ERROR_ABORTED ||
        code == CCL_ERROR_SYSTEM || code == CCL_ERROR_OUT_OF_MEMORY ||
        (code == CCL_ERROR_INVALID_USAGE && fabric_ && !p2p))
        arena_->mark_failed(code);
    // A failed wait leaves the ranks out of step: nothing more can run on this communicator.
    if (!arena_->failed()) return;
    // The other nodes' ranks learn it at once; nothing more moves over the fabric: its waits
    // fail at once, its sends are not waited for at destruction.
    if (fabric_) {
        fabric_->notify_failure(e.code(), e.what(), remote_ranks());
        fabric_->abort();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_) broken_ = e;
    is_broken_.store(true, std::memory_order_release);
}

void Communicator::abort() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        // An abort overrides an earlier failure: every later call says it was aborted.
        broken_ = Error(CCL_ERROR_ABORTED, "the communicator was aborted (ccl_comm_abort)");
        is_broken_.store(true, std::memory_order_release);
    }
    arena_->abort();
    if (fabric_) {
        fabric_->notify_failure(CCL_ERROR_ABORTED, "it aborted the communicator (ccl_comm_abort)",
                                remote_ranks());
        fabric_->abort();
    }
    mailbox_->wake_all();
    log().info("rank {}/{}: communicator aborted", rank_, size_);
}

ccl_result_t Communicator::async_error(std::string* message) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (broken_) {
            if (message) *message = broken_->what();
            return broken_->code();
        }
    }
    // No call of this rank failed yet, but a peer may have said that it did.
    return arena_->peer_failure(message);
}

// Inlined: it is on the path of every blocking call.
[[gnu::always_inline]] inline void Communicator::execute_now(const Schedule& schedule,
                                                             const Buffers& bufs) {
    try {
        execute(schedule, bufs);
    } catch (const Error& e) {
        note_failure(e, is_p2p(schedule.sig.coll));
        throw;
    }
}

bool Communicator::recv_now(const CollSignature& sig, const Buffers& bufs,
                            std::shared_ptr<Request>* req) {
    const size_t bytes = sig.count * dtype_size(sig.dtype);
    // One that may go single-copy takes the general path, which offers its buffer to the sender.
    if (fabric_ || bytes > shm::Mailbox::kQuickBytes || bytes >= shape_.copy.p2p_min || !idle())
        return false;
    check_broken(false);  // as start() does
    if (sig.count != last_recv_.count || sig.dtype != last_recv_.dtype) {
        last_recv_ = sig;
        last_recv_digest_ = sig.p2p_digest();
    }
    if (mailbox_->try_recv(bufs.recv, bytes, last_recv_digest_, sig.root)) {
        if (req) {
            *req = make_pooled<Request>();
            (*req)->complete(CCL_SUCCESS);
        }
        return true;
    }
    if (!req) return false;
    // Idle: an earlier deferred receive is resolved and its execution, if it had one, finished,
    // so no lock is needed to reuse the fields. Not counted in pending_ (two locked instructions
    // a receive) until it becomes an execution: idle() looks at it instead.
    deferred_sig_ = sig;
    deferred_buf_ = bufs.recv;
    deferred_digest_ = last_recv_digest_;
    deferred_exec_.reset();
    deferred_ = make_pooled<Request>();
    // A message in flight arrives within a cache-line transfer or two: worth a few polls before
    // paying for an execution (which then waits the usual way). Where the ranks share cores, the
    // sender may need this one's core: yield it between the tries (as the waits do).
    const shm::WaitPolicy& policy = arena_->policy();
    deferred_->defer(this, policy.own_core ? 64 : policy.yields, !policy.own_core);
    *req = deferred_;
    return true;
}

bool Communicator::send_now(const CollSignature& sig, const Buffers& bufs) {
    const size_t bytes = sig.count * dtype_size(sig.dtype);
    if (fabric_ || bytes > shm::Mailbox::kSpanMax || bytes >= shape_.copy.p2p_min) return false;
    check_broken();  // as run() does for a send
    if (sig.count != last_send_.count || sig.dtype != last_send_.dtype) {
        last_send_ = sig;
        last_send_digest_ = sig.p2p_digest();
    }
    return mailbox_->try_send(bufs.send, bytes, last_send_digest_, sig.root);
}

bool Communicator::try_complete(Request& r) {
    const size_t bytes = deferred_sig_.count * dtype_size(deferred_sig_.dtype);
    if (is_broken_.load(std::memory_order_acquire) ||
        !mailbox_->try_recv(deferred_buf_, bytes, deferred_digest_, deferred_sig_.root))
        return false;
    r.undefer();
    r.complete(CCL_SUCCESS);
    return true;
}

void Communicator::materialize(Request& r) {
    assert(&r == deferred_.get());  // the only request deferred to this communicator
    // Nothing was pending when it was deferred: it follows no unfinished execution. Counted
    // before it is undeferred, so that idle() sees one or the other.
    pending_.fetch_add(1, std::memory_order_relaxed);
    deferred_exec_ = make_pooled<Execution>(
        std::make_shared<const Schedule>(plan(*this, deferred_sig_)),
        Buffers{nullptr, deferred_buf_, {}}, RequestList{deferred_}, nullptr, shared_from_this());
    r.set_execution(deferred_exec_);
    r.undefer();
}

void Communicator::run(const CollSignature& sig, const Buffers& bufs) {
    run(schedule_for(sig, {}), bufs);
}

void Communicator::run(const std::shared_ptr<const Schedule>& schedule, const Buffers& bufs) {
    check_broken();
    // Only this communicator's (single) user thread adds work, so when nothing is pending no
    // worker touches the arena and the call may run right here.
    if (schedule->sig.coll == CollType::send || idle()) {
        execute_now(*schedule, bufs);
        return;
    }
    auto req = make_pooled<Request>();
    start(schedule, bufs, {req});
    req->wait();
    req->rethrow();
}

void Communicator::start(std::shared_ptr<const Schedule> schedule, const Buffers& bufs,
                         RequestList reqs) {
    check_broken(schedule->sig.coll == CollType::send);
    if (schedule->sig.coll == CollType::send) {  // never queues (see run)
        ccl_result_t code = CCL_SUCCESS;
        std::string message;
        try {
            execute_now(*schedule, bufs);
        } catch (const Error& e) {
            code = e.code();
            message = e.what();
        }
        for (const auto& r : reqs) r->complete(code, message);
        return;
    }
    unpark();  // queued work runs in issue order
    // With nothing of this communicator queued, this thread starts the work itself: a receive
    // offers its buffer to the sender at once, a collective publishes its input.
    const bool idle = pending_.fetch_add(1, std::memory_order_acq_rel) == 0;
    const bool parkable = schedule->sig.coll == CollType::recv;
    // The execution keeps this communicator alive until it has run. Only the user thread starts
    // work, so last_started_ needs no lock.
    auto exec = make_pooled<Execution>(std::move(schedule), bufs, std::move(reqs),
                                       std::move(last_started_), shared_from_this());
    for (const auto& r : exec->requests()) r->set_execution(exec);
    last_started_ = exec;
    if (idle && exec->progress()) return;  // finished already
    if (idle && parkable) {
        // A posted receive holds up no peer (senders never wait for it), so it needs no worker
        // until this thread moves on: waiting on it, testing it or the next call finishes it
        // without waking a thread (a wake-up costs more than a small message).
        parked_ = std::move(exec);
        return;
    }
    hand_to_worker(std::move(exec));
}

void Communicator::hand_to_worker(std::shared_ptr<Execution> exec) {
    // The worker holds it weakly; this thread keeps it until it has finished and lets it go at a
    // later call (release_finished). A nonblocking call is usually finished by its caller, and
    // the worker, had it held the last reference, would free the execution, its requests and its
    // frames on its own cpu, and drop a reference to the schedule this thread is reusing: their
    // cache lines and the allocator's blocks then crossed to the worker's cpu and back at every
    // call (16-core host, 2 ranks, 8 B allreduce waited on at once: 1.5-1.7 us, 0.9-1.1 without).
    workers().submit(id_, exec);
    inflight_.push_back(std::move(exec));
}

void Communicator::release_finished() {
    while (!inflight_.empty() && inflight_.front()->finished()) inflight_.pop_front();
}

void Communicator::finished(Execution& e, ccl_result_t code, const std::string& message) {
    if (code != CCL_SUCCESS) note_failure(Error(code, message), is_p2p(e.schedule().sig.coll));
    for (const auto& r : e.requests()) r->complete(code, message);
    // The locked subtraction orders it before the look at the sleepers (Dekker with wait_idle).
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1 &&
        idle_waiters_.load(std::memory_order_relaxed) != 0)
        futex_wake_all(&pending_);
}

void Communicator::unpark() {
    if (deferred_) [[unlikely]] {
        std::shared_ptr<Execution> exec;
        {
            deferred_->exclude_owner();
            auto lock = deferred_->lock();
            if (deferred_->deferred()) materialize(*deferred_);
            exec = std::move(deferred_exec_);  // null if a wait or test took the message
        }
        deferred_.reset();
        if (exec) {
            last_started_ = exec;  // what comes next runs after it
            parked_ = std::move(exec);
        }
    }
    // Usually it has finished, waited on: then no worker needs waking.
    if (parked_ && !parked_->finished()) hand_to_worker(std::move(parked_));
    parked_.reset();
    release_finished();
}

void Communicator::wait_idle() {
    unpark();
    // Queued work finishes or fails within its own deadlines (CCL_TIMEOUT).
    idle_waiters_.fetch_add(1, std::memory_order_seq_cst);
    for (uint32_t n; (n = pending_.load(std::memory_order_seq_cst)) != 0;)
        futex_wait(&pending_, n, std::chrono::milliseconds(50));
    idle_waiters_.fetch_sub(1, std::memory_order_relaxed);
    release_finished();
}

}  // namespace ccl

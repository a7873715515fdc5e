#include "core/comm.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>

#include "core/config.h"
#include "core/executor.h"
#include "core/log.h"
#include "core/planner.h"
#include "core/reduce.h"
#include "core/schedule_cache.h"
#include "core/worker.h"
#include "kvs/kvs.h"
#include "shm/cma.h"

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

// Ranks share memory when they share a host: its name and this boot.
std::string host_id() {
    char name[256] = {};
    ::gethostname(name, sizeof(name) - 1);
    std::string boot;
    std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
    return std::string(name) + "/" + boot;
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
    void barrier() override { kvs_.barrier(prefix_ + "mapped", size_, config().kvs_timeout_s); }

private:
    kvs::Client& kvs_;
    std::string prefix_;
    int size_, rank_;
};

// Shares over the parent of a split: every parent rank makes the same calls, whatever its color,
// and gets its own group's root's value (root < 0: none).
class ParentBootstrap final : public Bootstrap {
public:
    ParentBootstrap(Communicator& parent, int root) : parent_(parent), root_(root) {}
    std::string from_root(const std::string& value) override {
        shared_ = true;
        constexpr size_t kRecord = 256;
        std::vector<char> mine(kRecord, 0), all(kRecord * size_t(parent_.size()));
        value.copy(mine.data(), kRecord - 1);
        parent_.run({CollType::allgather, kRecord, CCL_UINT8, CCL_SUM, 0},
                    {mine.data(), all.data(), {}});
        return root_ < 0 ? std::string() : std::string(all.data() + size_t(root_) * kRecord);
    }
    void barrier() override {
        synced_ = true;
        parent_.run(CollSignature{}, {});
    }
    // The calls a failed constructor did not get to, so that no other rank waits for them.
    void finish() noexcept {
        try {
            if (!shared_) from_root("");
            if (!synced_) barrier();
        } catch (const Error&) {  // the parent is broken: the others see that too
        }
    }

private:
    Communicator& parent_;
    int root_;
    bool shared_ = false, synced_ = false;
};

std::unique_ptr<Bootstrap> kvs_bootstrap(kvs::Client& kvs, int size, int rank) {
    return std::make_unique<KvsBootstrap>(kvs, size, rank);
}

}  // namespace

Communicator::Communicator(int size, int rank, kvs::Client& kvs)
    : Communicator(size, rank, *kvs_bootstrap(kvs, size, rank)) {}

Communicator::Communicator(int size, int rank, Bootstrap& boot)
    : id_(next_comm_id++), size_(size), rank_(rank), config_(ccl::config()) {
    const Config& cfg = config_;
    const std::string host = host_id();
    size_t buffer_size = cfg.shm_buffer_size;
    std::string shared;
    if (rank == 0) {
        // Lay the segments out before publishing their name: a peer may map them at once.
        std::string name = segment_name();
        // The segments' job id travels with their names: a segment that does not carry it
        // (stale, foreign, replaced) is refused when the others open it.
        shm::JobId job = kvs::random_secret();
        arena_.emplace(shm::Segment::create(name, shm::Arena::bytes_needed(size, buffer_size), job),
                       size, rank, buffer_size, cfg.timeout_s, true);
        mailbox_.emplace(shm::Segment::create(name + "-m", shm::Mailbox::bytes_needed(size), job),
                         name + "-d", *arena_);
        shared = name + " " + std::to_string(buffer_size) + " " + host + " " + kvs::secret_hex(job);
    }
    std::istringstream in(boot.from_root(shared));
    if (rank != 0) {
        std::string name, root_host, job_hex;
        in >> name >> buffer_size >> root_host >> job_hex;
        auto job = kvs::parse_secret_hex(job_hex);
        if (!job)
            throw Error(CCL_ERROR_INTERNAL, "rank 0's bootstrap record for shared memory '" +
                                                in.str() + "' is malformed");
        if (root_host != host)
            throw Error(CCL_ERROR_UNSUPPORTED,
                        "rank " + std::to_string(rank) + " runs on host " + host +
                            " but rank 0 on " + root_host +
                            ": ranks on several nodes need the libfabric transport, "
                            "which this build does not have yet");
        arena_.emplace(shm::Segment::open(name, shm::Arena::bytes_needed(size, buffer_size), *job),
                       size, rank, buffer_size, cfg.timeout_s, false);
        mailbox_.emplace(shm::Segment::open(name + "-m", shm::Mailbox::bytes_needed(size), *job),
                         name + "-d", *arena_);
    }
    // Once every rank has mapped the segments their names can go: nothing is left in /dev/shm,
    // whatever happens to the processes later.
    boot.barrier();
    if (rank == 0) {
        arena_->segment().unlink();
        mailbox_->segment().unlink();
    }
    single_copy_ = probe_single_copy();
    recent_ = {};  // planned before single copy was known
    workers();     // started now, so that the first nonblocking call does not pay for it
    log().info(
        "rank {}/{}: communicator ready, transport shm ({} KiB per buffer, single copy {}), "
        "{} kernels",
        rank, size, buffer_size >> 10, single_copy_ ? "on" : "off", isa_name(reduce_isa()));
}

bool Communicator::probe_single_copy() {
    if (size_ == 1) return false;
    // Every rank reads a word of the next rank's memory; all must succeed (and want it).
    const int64_t word = 0x63636c;
    std::vector<int64_t> mine{::getpid(), int64_t(reinterpret_cast<intptr_t>(&word))};
    std::vector<int64_t> all(2 * size_t(size_));
    run({CollType::allgather, 2, CCL_INT64, CCL_SUM, 0}, {mine.data(), all.data(), {}});
    size_t next = size_t((rank_ + 1) % size_);
    int32_t ok =
        config_.single_copy &&
        shm::cma_probe(pid_t(all[2 * next]),
                       reinterpret_cast<const void*>(intptr_t(all[2 * next + 1])), sizeof(word));
    int32_t every = 0;
    run({CollType::allreduce, 1, CCL_INT32, CCL_MIN, 0}, {&ok, &every, {}});
    if (!every && config_.single_copy && rank_ == 0)
        log().info(
            "single-copy transfers (process_vm_readv) are not allowed here: ptrace "
            "restrictions or a seccomp profile; using shared-memory copies only");
    return every != 0;
}

std::shared_ptr<Communicator> Communicator::split(int color, int key) {
    std::vector<int32_t> mine{color, key}, all(2 * size_t(size_));
    run({CollType::allgather, 2, CCL_INT32, CCL_SUM, 0}, {mine.data(), all.data(), {}});
    std::vector<int> members;  // parent ranks of my color, in their new order
    for (int r = 0; r < size_; ++r)
        if (color != CCL_UNDEFINED && all[2 * size_t(r)] == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(),
                     [&](int a, int b) { return all[2 * size_t(a) + 1] < all[2 * size_t(b) + 1]; });
    ParentBootstrap boot(*this, members.empty() ? -1 : members[0]);
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

void Communicator::check_broken(bool peers) {
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

std::shared_ptr<const Schedule> Communicator::schedule_for(const CollSignature& sig,
                                                           const CallOptions& opts) {
    check_broken(false);  // run() or start() looks at the peers
    if (opts.to_cache) {
        if (auto cached = schedule_cache().find(opts.match_id, id_, sig)) return cached;
    } else {
        for (const auto& r : recent_)
            if (r && r->sig == sig) return r;
    }
    auto schedule = std::make_shared<const Schedule>(plan(*this, sig));
    // Report each algorithm once (step names are literals: their addresses identify them).
    const char* first = schedule->steps.empty() ? "none" : schedule->steps.front().name;
    if (logged_.insert(first).second)
        log().info("rank {}/{}: {} uses {}", rank_, size_, coll_name(sig.coll),
                   schedule->algorithm());
    if (opts.to_cache)
        schedule_cache().insert(opts.match_id, id_, schedule);
    else
        recent_[next_recent_++ % recent_.size()] = schedule;
    return schedule;
}

void Communicator::note_failure(const Error& e) {
    // A dead peer seen outside the arena's waits (a single-copy transfer) or a wait that timed
    // out leaves the ranks out of step like a failed wait: make the peers see it too.
    if (e.code() == CCL_ERROR_PEER_FAILURE || e.code() == CCL_ERROR_TIMEOUT ||
        e.code() == CCL_ERROR_ABORTED)
        arena_->mark_failed(e.code());
    // A failed wait leaves the ranks out of step: nothing more can run on this communicator.
    if (!arena_->failed()) return;
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

void Communicator::execute_now(const Schedule& schedule, const Buffers& bufs) {
    try {
        execute(schedule, bufs);
    } catch (const Error& e) {
        note_failure(e);
        throw;
    }
}

void Communicator::run(const CollSignature& sig, const Buffers& bufs) {
    run(schedule_for(sig, {}), bufs);
}

void Communicator::run(std::shared_ptr<const Schedule> schedule, const Buffers& bufs) {
    check_broken();
    // Only this communicator's (single) user thread adds work, so when nothing is pending no
    // worker touches the arena and the call may run right here.
    if (schedule->sig.coll == CollType::send || pending_.load(std::memory_order_acquire) == 0) {
        execute_now(*schedule, bufs);
        return;
    }
    auto req = std::make_shared<Request>();
    start(std::move(schedule), bufs, {req});
    req->wait();
    req->rethrow();
}

void Communicator::start(std::shared_ptr<const Schedule> schedule, const Buffers& bufs,
                         std::vector<std::shared_ptr<Request>> reqs) {
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
    std::vector<std::shared_ptr<Request>> waiting = reqs;
    // The execution keeps this communicator alive until it has run.
    auto on_done = [self = shared_from_this(), reqs = std::move(reqs)](ccl_result_t code,
                                                                       const std::string& msg) {
        if (code != CCL_SUCCESS) self->note_failure(Error(code, msg));
        for (const auto& r : reqs) r->complete(code, msg);
        std::lock_guard<std::mutex> lock(self->mu_);
        if (self->pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) self->idle_.notify_all();
    };
    // Only the user thread starts work, so last_started_ needs no lock.
    auto exec = std::make_shared<Execution>(std::move(schedule), bufs, std::move(on_done),
                                            std::move(last_started_), shared_from_this());
    for (const auto& r : waiting) r->set_execution(exec);
    last_started_ = exec;
    if (idle && exec->progress()) return;  // finished already
    if (idle && parkable) {
        // A posted receive holds up no peer (senders never wait for it), so it needs no worker
        // until this thread moves on: waiting on it, testing it or the next call finishes it
        // without waking a thread (a wake-up costs more than a small message).
        parked_ = std::move(exec);
        return;
    }
    workers().submit(id_, std::move(exec));
}

void Communicator::unpark() {
    // Usually it has finished, waited on: then no worker needs waking.
    if (parked_ && !parked_->finished()) workers().submit(id_, std::move(parked_));
    parked_.reset();
}

void Communicator::wait_idle() {
    unpark();
    std::unique_lock<std::mutex> lock(mu_);
    // Queued work finishes or fails within its own deadlines (CCL_TIMEOUT).
    idle_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
}

}  // namespace ccl

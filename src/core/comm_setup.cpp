// Communicator's set-up of its node's shared memory (and, across nodes, the fabric), and the
// check that every rank was given the same settings that choose algorithms.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <random>
#include <sstream>

#include "base/config.h"
#include "core/comm.h"
#include "kvs/secret.h"
#include "shm/segment.h"
#include "transport/fabric.h"

namespace ccl {

namespace {

std::string segment_name() {
    std::random_device rd;
    std::ostringstream s;
    s << "/ccl-" << ::getpid() << "-" << std::hex << (uint64_t(rd()) << 32 | rd());
    return s.str();
}

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

void Communicator::setup_single_node(Bootstrap& boot, size_t buffer_size) {
    const Config& cfg = config_;
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

void Communicator::setup_multinode(Bootstrap& boot, size_t buffer_size) {
    const Config& cfg = config_;
    const int local_size = topo_.local_size(), local_rank = topo_.local_rank();
    const bool leader = local_rank == 0;
    // Every rank publishes its endpoint's address, or why it has none (so that all fail alike,
    // naming the provider, rather than wait for it); each node's first rank also publishes its
    // node's segments.
    std::string record;
    try {
        fabric_ = transport::Fabric::open(rank_, size_, cfg.timeout_s);
        record = fabric_->name_hex();
    } catch (const Error& e) {
        std::string why = e.what();
        for (char& c : why)
            if (std::isspace(static_cast<unsigned char>(c))) c = '_';
        record = "!" + why.substr(0, 400);
    }
    if (leader) {  // appended in two steps: gcc 12 -O3 saw a false overlap (-Wrestrict) in one
        record += ' ';
        record += create_segments(arena_, mailbox_, local_size, buffer_size, cfg.timeout_s,
                                  wait_policy());
    }
    std::vector<std::string> all = boot.allgather(record);
    std::vector<std::string> names;
    for (int r = 0; r < size_; ++r) {
        std::istringstream in(all[size_t(r)]);
        std::string name;
        in >> name;
        if (name.empty() || name[0] == '!') {
            std::string why = name.empty() ? std::string("no record") : name.substr(1);
            std::replace(why.begin(), why.end(), '_', ' ');
            throw Error(CCL_ERROR_UNSUPPORTED, "rank " + std::to_string(r) +
                                                   " could not open its endpoint of the transport "
                                                   "across nodes (CCL_TRANSPORT), which "
                                                   "ranks on several nodes need: " +
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
        {"CCL_ALLREDUCE_CMA_MIN", c.allreduce_cma_min_set ? c.allreduce_cma_min : kUnset, false},
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

}  // namespace ccl

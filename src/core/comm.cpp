#include "core/comm.h"

#include <unistd.h>

#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>

#include "core/config.h"
#include "core/log.h"
#include "core/planner.h"
#include "kvs/kvs.h"

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

}  // namespace

Communicator::Communicator(int size, int rank, kvs::Client& kvs)
    : size_(size), rank_(rank), config_(ccl::config()) {
    const Config& cfg = config_;
    const std::string prefix = next_prefix(kvs.address(), size);
    const std::string host = host_id();
    size_t buffer_size = cfg.shm_buffer_size;
    if (rank == 0) {
        // Lay the arena out before publishing its name: a peer may map it at once.
        std::string name = segment_name();
        arena_.emplace(shm::Segment::create(name, shm::Arena::bytes_needed(size, buffer_size)),
                       size, rank, buffer_size, cfg.timeout_s, true);
        kvs.put(prefix + "shm", name + " " + std::to_string(buffer_size) + " " + host);
    } else {
        std::istringstream in(kvs.get(prefix + "shm", cfg.kvs_timeout_s));
        std::string name, root_host;
        in >> name >> buffer_size >> root_host;
        if (root_host != host)
            throw Error(CCL_ERROR_UNSUPPORTED,
                        "rank " + std::to_string(rank) + " runs on host " + host +
                            " but rank 0 on " + root_host +
                            ": ranks on several nodes need the libfabric transport, "
                            "which this build does not have yet");
        arena_.emplace(shm::Segment::open(name, shm::Arena::bytes_needed(size, buffer_size)), size,
                       rank, buffer_size, cfg.timeout_s, false);
    }
    // Once every rank has mapped the arena its name can go: nothing is left in /dev/shm, whatever
    // happens to the processes later.
    kvs.barrier(prefix + "mapped", size, cfg.kvs_timeout_s);
    if (rank == 0) arena_->segment().unlink();
    log().info("rank {}/{}: communicator ready, transport shm ({} KiB per buffer)", rank, size,
               buffer_size >> 10);
}

void Communicator::run(const CollSignature& sig, const Buffers& bufs) {
    if (broken_)
        throw Error(broken_->code(), std::string("communicator is broken by an earlier failure: ") +
                                         broken_->what());
    // Loops of the same call (the common case) plan once.
    if (!last_ || !(last_->sig == sig)) {
        last_ = plan(*this, sig);
        std::string key = std::string(coll_name(sig.coll)) + ":" + last_->algorithm();
        if (logged_.insert(key).second)
            log().info("rank {}/{}: {} uses {}", rank_, size_, coll_name(sig.coll),
                       last_->algorithm());
    }
    try {
        execute(*last_, bufs);
    } catch (const Error& e) {
        if (arena_->failed()) broken_ = e;
        throw;
    }
}

}  // namespace ccl

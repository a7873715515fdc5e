#include "core/bootstrap.h"

#include <map>
#include <mutex>

#include "base/config.h"
#include "base/error.h"
#include "core/comm.h"
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

}  // namespace

std::unique_ptr<Bootstrap> kvs_bootstrap(kvs::Client& kvs, int size, int rank) {
    return std::make_unique<KvsBootstrap>(kvs, size, rank);
}

std::string ParentBootstrap::from_root(const std::string& value) {
    std::vector<std::string> all = exchange(value);
    return root_ < 0 ? std::string() : all[size_t(root_)];
}

std::vector<std::string> ParentBootstrap::allgather(const std::string& value) {
    std::vector<std::string> all = exchange(value), mine;
    for (int r : members_) mine.push_back(all[size_t(r)]);
    return mine;
}

void ParentBootstrap::barrier() {
    synced_ = true;
    parent_.run(CollSignature{}, {});
}

void ParentBootstrap::finish() noexcept {
    try {
        while (exchanges_ < 2) exchange("");
        if (!synced_) barrier();
    } catch (const Error&) {  // the parent is broken: the others see that too
    }
}

std::vector<std::string> ParentBootstrap::exchange(const std::string& value) {
    ++exchanges_;
    constexpr size_t kRecord = 512;
    if (value.size() >= kRecord)
        throw Error(CCL_ERROR_INTERNAL,
                    "a bootstrap record of " + std::to_string(value.size()) + " bytes is too long");
    std::vector<char> mine(kRecord, 0), all(kRecord * size_t(parent_.size()));
    value.copy(mine.data(), kRecord - 1);
    parent_.run({CollType::allgather, kRecord, CCL_UINT8, CCL_SUM, 0},
                {mine.data(), all.data(), {}});
    std::vector<std::string> out;
    for (int r = 0; r < parent_.size(); ++r) out.emplace_back(all.data() + size_t(r) * kRecord);
    return out;
}

}  // namespace ccl

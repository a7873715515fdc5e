// How the ranks of a new communicator share what its rank 0 set up (the segments' names, the
// fabric's addresses): through the KVS, under a prefix of its own, or over the communicator it is
// split from.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace ccl {

class Communicator;
namespace kvs {
class Client;
}

class Bootstrap {
public:
    virtual ~Bootstrap() = default;
    // A communicator's creation makes two exchanges, then one barrier, on every rank: allgather
    // (node ids), then from_root (all ranks on one node) or allgather (several nodes), then
    // barrier.
    // Rank 0 passes its value; every rank gets it.
    virtual std::string from_root(const std::string& value) = 0;
    // Every rank passes its value (no whitespace); every rank gets all, by rank.
    virtual std::vector<std::string> allgather(const std::string& value) = 0;
    virtual void barrier() = 0;
};

// Shares through the KVS: rank 0 puts, the others get, under a prefix of this communicator's own.
std::unique_ptr<Bootstrap> kvs_bootstrap(kvs::Client& kvs, int size, int rank);

// Shares over the parent of a split: every parent rank makes the same calls, whatever its color,
// and gets its own group's root's value (root < 0: none).
class ParentBootstrap final : public Bootstrap {
public:
    ParentBootstrap(Communicator& parent, int root, std::vector<int> members)
        : parent_(parent), root_(root), members_(std::move(members)) {}
    std::string from_root(const std::string& value) override;
    std::vector<std::string> allgather(const std::string& value) override;
    void barrier() override;
    // The calls a failed constructor did not get to, so that no other rank waits for them.
    void finish() noexcept;

private:
    std::vector<std::string> exchange(const std::string& value);  // by parent rank

    Communicator& parent_;
    int root_;                  // the parent rank of the group's rank 0, or -1
    std::vector<int> members_;  // parent ranks of the group, in new rank order
    int exchanges_ = 0;
    bool synced_ = false;
};

}  // namespace ccl

// Communicator's failures: a broken communicator, what its peers are told, abort.
#include "base/log.h"
#include "core/comm.h"
#include "transport/fabric.h"

namespace ccl {

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

}  // namespace ccl

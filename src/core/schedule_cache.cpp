#include "core/schedule_cache.h"

#include "base/config.h"
#include "base/error.h"
#include "base/immortal.h"

namespace ccl {

std::shared_ptr<const Schedule> ScheduleCache::find(std::string_view match_id, uint64_t comm_id,
                                                    const CollSignature& sig) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(match_id);
    if (it == index_.end()) return nullptr;
    const Entry& e = *it->second;
    if (e.comm_id != comm_id)
        throw Error(CCL_ERROR_INVALID_USAGE, "match_id '" + std::string(match_id) +
                                                 "' is cached for another communicator; use one "
                                                 "match_id per call site and communicator");
    if (!(e.schedule->sig == sig))
        throw Error(CCL_ERROR_INVALID_USAGE, "match_id '" + std::string(match_id) +
                                                 "' is cached for " + e.schedule->sig.describe() +
                                                 ", not " + sig.describe());
    lru_.splice(lru_.begin(), lru_, it->second);  // now the most recently used
    return e.schedule;
}

void ScheduleCache::insert(std::string_view match_id, uint64_t comm_id,
                           std::shared_ptr<const Schedule> schedule) {
    std::lock_guard<std::mutex> lock(mu_);
    if (capacity_ == 0 || index_.find(match_id) != index_.end()) return;
    if (lru_.size() >= capacity_) {
        index_.erase(lru_.back().match_id);
        lru_.pop_back();
    }
    lru_.push_front({std::string(match_id), comm_id, std::move(schedule)});
    index_.emplace(lru_.front().match_id, lru_.begin());
}

void ScheduleCache::erase_comm(uint64_t comm_id) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = lru_.begin(); it != lru_.end();) {
        if (it->comm_id == comm_id) {
            index_.erase(it->match_id);
            it = lru_.erase(it);
        } else {
            ++it;
        }
    }
}

size_t ScheduleCache::size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lru_.size();
}

ScheduleCache& schedule_cache() {
    // Never destroyed: a communicator may be destroyed while the process exits (an atexit
    // handler, a static's destructor), after this function's static would be.
    static ScheduleCache& cache = immortal<ScheduleCache>(config().cache_size);
    return cache;
}

}  // namespace ccl

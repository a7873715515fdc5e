// The match_id schedule cache: planned schedules kept under the caller's match_id and reused by
// later calls with the same match_id. Process-wide (a match_id names one call site), bounded, least
// recently used first out. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/schedule.h"

namespace ccl {

class ScheduleCache {
public:
    explicit ScheduleCache(size_t capacity) : capacity_(capacity) {}

    // The schedule cached under `match_id`, or nullptr. Throws ccl::Error(CCL_ERROR_INVALID_USAGE)
    // when match_id is cached for another communicator or another signature: never a wrong plan.
    std::shared_ptr<const Schedule> find(std::string_view match_id, uint64_t comm_id,
                                         const CollSignature& sig);
    // Keeps `schedule` under match_id (replacing nothing: call find first), evicting the least
    // recently used entry when full.
    void insert(std::string_view match_id, uint64_t comm_id,
                std::shared_ptr<const Schedule> schedule);
    // Forgets every entry of a communicator (on its destruction).
    void erase_comm(uint64_t comm_id);
    size_t size() const;
    size_t capacity() const { return capacity_; }

private:
    struct Entry {
        std::string match_id;
        uint64_t comm_id;
        std::shared_ptr<const Schedule> schedule;
    };
    mutable std::mutex mu_;
    size_t capacity_;
    std::list<Entry> lru_;  // most recently used first
    struct Hash {           // looks string_views up without making strings
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::unordered_map<std::string, std::list<Entry>::iterator, Hash, std::equal_to<>> index_;
};

// The process's cache, sized by CCL_CACHE_SIZE.
ScheduleCache& schedule_cache();

}  // namespace ccl

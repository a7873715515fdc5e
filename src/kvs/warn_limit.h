// Rate limiting for the KVS server's warnings about misbehaving connections: a flood of hostile
// connections must not flood the log. In each interval (which starts at the first warning after a
// quiet one) the first `burst` warnings are written in full; the rest are only counted, and one
// summary line with their number is due when the interval ends. Time is passed in, so that tests
// need no clock.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

namespace ccl::kvs {

class WarnLimiter {
public:
    using Clock = std::chrono::steady_clock;

    WarnLimiter(size_t burst, Clock::duration interval) : burst_(burst), interval_(interval) {}

    // Whether a warning at `now` is to be written; if not, it is counted and `what` kept as the
    // latest of those held back.
    bool admit(Clock::time_point now, const std::string& what) {
        // An interval that is over starts afresh (what it held back stays counted for the next
        // summary, should due() not have been asked in between).
        if (!in_interval_ || now >= start_ + interval_) {
            in_interval_ = true;
            start_ = now;
            written_ = 0;
        }
        if (written_ < burst_) {
            ++written_;
            return true;
        }
        ++held_;
        last_held_ = what;
        return false;
    }

    struct Summary {
        size_t count;      // warnings held back
        std::string last;  // the latest of them
    };
    // The summary of the interval that ended by `now`, if it held anything back; ends that
    // interval either way, so the next warning starts a new one.
    std::optional<Summary> due(Clock::time_point now) {
        if (!in_interval_ || now < start_ + interval_) return std::nullopt;
        in_interval_ = false;
        return take();
    }
    // What is held back now, whether or not the interval is over (at shutdown).
    std::optional<Summary> flush() {
        in_interval_ = false;
        return take();
    }
    // When due() next has something to do; nullopt when nothing is pending.
    std::optional<Clock::time_point> next_due() const {
        if (!in_interval_) return std::nullopt;
        return start_ + interval_;
    }

private:
    std::optional<Summary> take() {
        if (held_ == 0) return std::nullopt;
        Summary s{held_, std::move(last_held_)};
        held_ = 0;
        last_held_.clear();
        return s;
    }

    size_t burst_;
    Clock::duration interval_;
    bool in_interval_ = false;
    Clock::time_point start_{};
    size_t written_ = 0;
    size_t held_ = 0;
    std::string last_held_;
};

}  // namespace ccl::kvs

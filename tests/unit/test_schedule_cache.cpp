// The match_id schedule cache on its own: hits return the cached plan, misses nothing, a reused
// match_id with another communicator or signature is refused (never a wrong plan), LRU eviction,
// per-communicator erase, and concurrent use from several threads.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "core/schedule_cache.h"

namespace {

using ccl::CollSignature;
using ccl::CollType;
using ccl::Schedule;
using ccl::ScheduleCache;

CollSignature allreduce_sig(size_t count = 1000) {
    CollSignature s;
    s.coll = CollType::allreduce;
    s.count = count;
    s.dtype = CCL_FLOAT32;
    s.op = CCL_SUM;
    s.root = 0;
    return s;
}

std::shared_ptr<const Schedule> make_schedule(const CollSignature& sig) {
    auto s = std::make_shared<Schedule>();
    s->sig = sig;
    s->steps.push_back({"test/step", [](const ccl::Buffers&) -> ccl::Task { co_return; }});
    return s;
}

// find() must refuse with CCL_ERROR_INVALID_USAGE and name the match_id in its message.
void expect_refused(ScheduleCache& cache, const std::string& id, uint64_t comm,
                    const CollSignature& sig, const std::string& what) {
    try {
        auto got = cache.find(id, comm, sig);
        ADD_FAILURE() << what << ": find succeeded (returned " << (got ? "a schedule" : "nullptr")
                      << ")";
    } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), CCL_ERROR_INVALID_USAGE) << what << ": " << e.what();
        EXPECT_NE(std::string(e.what()).find(id), std::string::npos)
            << what << ": message '" << e.what() << "' does not name the match_id";
    }
}

TEST(ScheduleCache, HitReturnsTheSameSchedule) {
    ScheduleCache cache(8);
    EXPECT_EQ(cache.capacity(), 8u);
    EXPECT_EQ(cache.size(), 0u);
    auto sig = allreduce_sig();
    auto s = make_schedule(sig);
    cache.insert("grad", 1, s);
    EXPECT_EQ(cache.size(), 1u);
    for (int i = 0; i < 3; ++i) {
        auto got = cache.find("grad", 1, sig);
        EXPECT_EQ(got.get(), s.get());
    }
    EXPECT_EQ(cache.size(), 1u);
}

TEST(ScheduleCache, MissIsNullptr) {
    ScheduleCache cache(8);
    auto sig = allreduce_sig();
    EXPECT_EQ(cache.find("nothing", 1, sig), nullptr);
    cache.insert("a", 1, make_schedule(sig));
    EXPECT_EQ(cache.find("b", 1, sig), nullptr);
    EXPECT_EQ(cache.find("", 1, sig), nullptr);
    EXPECT_EQ(cache.find("A", 1, sig), nullptr) << "match_ids are case-sensitive";
    EXPECT_EQ(cache.find("a ", 1, sig), nullptr);
    EXPECT_NE(cache.find("a", 1, sig), nullptr);
}

TEST(ScheduleCache, OtherCommunicatorIsRefused) {
    ScheduleCache cache(8);
    auto sig = allreduce_sig();
    auto s = make_schedule(sig);
    cache.insert("layer1", 7, s);
    expect_refused(cache, "layer1", 8, sig, "other communicator");
    // The entry is intact for its own communicator.
    EXPECT_EQ(cache.find("layer1", 7, sig).get(), s.get());
}

TEST(ScheduleCache, EverySignatureFieldIsChecked) {
    ScheduleCache cache(16);
    CollSignature base = allreduce_sig(4096);
    base.dtype = CCL_BFLOAT16;
    base.op = CCL_MAX;
    base.root = 1;
    auto s = make_schedule(base);
    cache.insert("sig", 3, s);

    CollSignature v = base;
    v.coll = CollType::broadcast;
    expect_refused(cache, "sig", 3, v, "collective");
    v = base;
    v.coll = CollType::barrier;
    expect_refused(cache, "sig", 3, v, "collective (barrier)");
    v = base;
    v.count = 4095;
    expect_refused(cache, "sig", 3, v, "count");
    v = base;
    v.count = 0;
    expect_refused(cache, "sig", 3, v, "count 0");
    v = base;
    v.dtype = CCL_FLOAT16;  // same element size: still another call
    expect_refused(cache, "sig", 3, v, "dtype");
    v = base;
    v.op = CCL_MIN;
    expect_refused(cache, "sig", 3, v, "op");
    v = base;
    v.root = 0;
    expect_refused(cache, "sig", 3, v, "root");

    // None of the refusals disturbed the entry.
    EXPECT_EQ(cache.find("sig", 3, base).get(), s.get());
}

TEST(ScheduleCache, LeastRecentlyUsedGoesFirst) {
    ScheduleCache cache(3);
    auto sig = allreduce_sig();
    auto a = make_schedule(sig), b = make_schedule(sig), c = make_schedule(sig);
    cache.insert("a", 1, a);
    cache.insert("b", 1, b);
    cache.insert("c", 1, c);
    EXPECT_EQ(cache.size(), 3u);
    // Finding "a" makes it the most recent: "b" is now the oldest and goes first.
    EXPECT_EQ(cache.find("a", 1, sig).get(), a.get());
    auto d = make_schedule(sig);
    cache.insert("d", 1, d);
    EXPECT_EQ(cache.size(), 3u);
    EXPECT_EQ(cache.find("b", 1, sig), nullptr);
    EXPECT_EQ(cache.find("a", 1, sig).get(), a.get());
    EXPECT_EQ(cache.find("c", 1, sig).get(), c.get());
    EXPECT_EQ(cache.find("d", 1, sig).get(), d.get());
    // Order of use now: d, c, a (most recent first). Two more inserts push out a, then c.
    cache.insert("e", 1, make_schedule(sig));
    EXPECT_EQ(cache.find("a", 1, sig), nullptr);
    // Touch c after the check above so it is the most recent, then d goes next.
    EXPECT_NE(cache.find("c", 1, sig), nullptr);
    cache.insert("f", 1, make_schedule(sig));
    EXPECT_EQ(cache.find("d", 1, sig), nullptr);
    EXPECT_NE(cache.find("c", 1, sig), nullptr);
    EXPECT_NE(cache.find("e", 1, sig), nullptr);
    EXPECT_NE(cache.find("f", 1, sig), nullptr);
    EXPECT_EQ(cache.size(), 3u);
}

TEST(ScheduleCache, EvictedIdIsFreshAndHeldSchedulesStayAlive) {
    ScheduleCache cache(1);
    auto sig = allreduce_sig();
    auto a = make_schedule(sig);
    cache.insert("a", 1, a);
    std::shared_ptr<const Schedule> held = cache.find("a", 1, sig);  // e.g. a running request
    cache.insert("b", 1, make_schedule(sig));
    EXPECT_EQ(cache.size(), 1u);
    // The evicted plan is still usable by whoever holds it.
    ASSERT_EQ(held.get(), a.get());
    EXPECT_EQ(held->sig, sig);
    EXPECT_EQ(held->steps.size(), 1u);
    // "a" is forgotten entirely: another communicator and signature may take it now.
    auto other = allreduce_sig(5);
    EXPECT_EQ(cache.find("a", 2, other), nullptr);
    auto a2 = make_schedule(other);
    cache.insert("a", 2, a2);
    EXPECT_EQ(cache.find("a", 2, other).get(), a2.get());
    expect_refused(cache, "a", 1, sig, "re-cached for another communicator");
}

TEST(ScheduleCache, EraseCommRemovesOnlyThatCommunicator) {
    ScheduleCache cache(16);
    auto sig = allreduce_sig();
    std::vector<std::shared_ptr<const Schedule>> keep;
    for (int i = 0; i < 4; ++i) {
        cache.insert("c1-" + std::to_string(i), 1, make_schedule(sig));
        auto s = make_schedule(sig);
        keep.push_back(s);
        cache.insert("c2-" + std::to_string(i), 2, s);
    }
    cache.insert("c3", 3, make_schedule(sig));
    EXPECT_EQ(cache.size(), 9u);
    cache.erase_comm(1);
    EXPECT_EQ(cache.size(), 5u);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(cache.find("c1-" + std::to_string(i), 1, sig), nullptr);
        EXPECT_EQ(cache.find("c2-" + std::to_string(i), 2, sig).get(), keep[size_t(i)].get());
    }
    EXPECT_NE(cache.find("c3", 3, sig), nullptr);
    // A freed match_id is free for any communicator.
    EXPECT_EQ(cache.find("c1-0", 2, allreduce_sig(9)), nullptr);
    cache.erase_comm(42);  // nothing of it: no effect
    EXPECT_EQ(cache.size(), 5u);
    cache.erase_comm(2);
    cache.erase_comm(3);
    EXPECT_EQ(cache.size(), 0u);
}

// Four threads find and insert their own match_ids at once: every hit is the thread's own plan.
// Run under TSan too. The small capacity makes the threads evict each other's entries.
TEST(ScheduleCache, ConcurrentFindAndInsert) {
    for (size_t capacity : {size_t(1000), size_t(6)}) {
        ScheduleCache cache(capacity);
        std::atomic<int> wrong{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t) {
            threads.emplace_back([&cache, &wrong, t] {
                for (int i = 0; i < 2000; ++i) {
                    std::string id = "t" + std::to_string(t) + "-" + std::to_string(i % 50);
                    auto sig = allreduce_sig(size_t(t * 100 + i % 50));
                    try {
                        auto got = cache.find(id, uint64_t(t), sig);
                        if (!got) {
                            got = make_schedule(sig);
                            cache.insert(id, uint64_t(t), got);
                        }
                        if (!(got->sig == sig)) wrong.fetch_add(1);
                        (void)cache.size();
                    } catch (const ccl::Error&) {
                        wrong.fetch_add(1);  // nobody else uses this thread's ids
                    }
                }
            });
        }
        for (auto& th : threads) th.join();
        EXPECT_EQ(wrong.load(), 0) << "capacity " << capacity;
        EXPECT_LE(cache.size(), capacity);
        if (capacity >= 200) {
            EXPECT_EQ(cache.size(), 200u);
        }
    }
}

}  // namespace

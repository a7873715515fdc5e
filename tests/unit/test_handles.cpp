// The handle table's entries (bindings/c/api.h, "Entries"): threads that race to enter one slot
// never are inside together, although the way in takes no locked instruction; a retired slot's
// object is released exactly once, by the retire or by the call inside.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "../../bindings/c/api.h"

namespace ccl::capi {
uint64_t random_key() noexcept { return 0x9e3779b97f4a7c15ull; }  // errors.cpp's, not linked here
}  // namespace ccl::capi

namespace {

using ccl::capi::HandleTable;

struct Obj {
    std::atomic<int> inside{0};
};

constinit HandleTable<Obj, 5> g_table;

TEST(HandleTable, EntriesExcludeEachOther) {
    void* h = g_table.add<void*>(std::make_shared<Obj>());
    Obj& obj = g_table.use(h, "object");
    std::atomic<int> started{0}, both{0}, ran{0}, refused{0};
    auto race = [&] {
        ++started;
        while (started.load() < 4) std::this_thread::yield();
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
        while (std::chrono::steady_clock::now() < until) {
            try {
                auto entry = g_table.enter(h, "object");
                if (entry->inside.fetch_add(1) != 0) ++both;
                for (int i = 0; i < 20; ++i) std::atomic_signal_fence(std::memory_order_seq_cst);
                entry->inside.fetch_sub(1);
                ++ran;
            } catch (const ccl::Error& e) {
                EXPECT_EQ(e.code(), CCL_ERROR_INVALID_USAGE) << e.what();
                ++refused;
            }
        }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back(race);
    for (auto& t : threads) t.join();
    EXPECT_EQ(both.load(), 0) << "two threads were inside at once";
    EXPECT_GT(ran.load(), 0);
    EXPECT_GT(refused.load(), 0) << "the threads never met: the test saw nothing";
    EXPECT_EQ(obj.inside.load(), 0);
    EXPECT_TRUE(g_table.retire(h, "object"));  // nobody inside: the retire releases it
}

TEST(HandleTable, RetireWithACallInsideLeavesTheObjectToIt) {
    void* h = g_table.add<void*>(std::make_shared<Obj>());
    const std::weak_ptr<Obj> watch = g_table.get(h, "object");
    {
        auto entry = g_table.enter(h, "object");
        std::thread other([&] { EXPECT_FALSE(g_table.retire(h, "object")); });
        other.join();
        EXPECT_THROW(g_table.use(h, "object"), ccl::Error);  // the handle is gone at once
        EXPECT_FALSE(watch.expired());                       // the object is still there
        entry->inside = 1;
    }
    EXPECT_TRUE(watch.expired()) << "the call's leave released it";
    EXPECT_THROW(g_table.enter(h, "object"), ccl::Error);
}

}  // namespace

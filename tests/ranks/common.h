// Shared by the multi-rank tests: one communicator per process, created from cclrun's
// environment, and helpers that state a failed ccl call with its message.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ccl/ccl.h"

namespace test {

inline ccl_comm_t g_comm = nullptr;
inline int g_rank = 0, g_size = 1;

class CommEnvironment : public ::testing::Environment {
public:
    void SetUp() override {
        ASSERT_EQ(ccl_comm_create_from_env(&g_comm), CCL_SUCCESS) << ccl_last_error();
        ASSERT_EQ(ccl_comm_rank(g_comm, &g_rank), CCL_SUCCESS);
        ASSERT_EQ(ccl_comm_size(g_comm, &g_size), CCL_SUCCESS);
    }
    void TearDown() override {
        EXPECT_EQ(ccl_comm_destroy(g_comm), CCL_SUCCESS) << ccl_last_error();
    }
};

inline const ::testing::Environment* const g_env =
    ::testing::AddGlobalTestEnvironment(new CommEnvironment);

#define CCL_OK(call) ASSERT_EQ((call), CCL_SUCCESS) << #call << ": " << ccl_last_error()

// The call fails with `code` and leaves a message mentioning `word`.
#define EXPECT_FAILS(call, code, word)                                                      \
    do {                                                                                    \
        ccl_result_t r_ = (call);                                                           \
        EXPECT_EQ(r_, code) << #call << ": " << ccl_last_error();                           \
        EXPECT_NE(std::string(ccl_last_error()).find(word), std::string::npos)              \
            << #call << ": message '" << ccl_last_error() << "' does not mention '" << word \
            << "'";                                                                         \
    } while (0)

// After an error, the communicator still gives right results.
inline void expect_comm_still_works(ccl_comm_t comm = g_comm) {
    std::vector<int32_t> v(7);
    for (size_t i = 0; i < v.size(); ++i) v[i] = g_rank + int32_t(i);
    CCL_OK(ccl_allreduce(v.data(), v.data(), v.size(), CCL_INT32, CCL_SUM, comm, nullptr, nullptr));
    for (size_t i = 0; i < v.size(); ++i)
        EXPECT_EQ(v[i], g_size * (g_size - 1) / 2 + g_size * int32_t(i));
}

}  // namespace test

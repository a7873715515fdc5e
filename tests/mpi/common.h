// Shared by the multi-rank tests: one communicator per process, created from cclrun's
// environment, and helpers that state a failed ccl call with its message.
#pragma once

#include <gtest/gtest.h>

#include <string>

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

}  // namespace test

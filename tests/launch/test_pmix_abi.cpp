// src/kvs/pmix_abi.h copies a few PMIx types and constants so that ccl builds and loads without
// PMIx; here they meet the real headers (libpmix-dev). A mismatch fails the build or the test.
#include <gtest/gtest.h>
#include <pmix.h>

#include <cstddef>

#include "kvs/pmix_abi.h"

namespace mine = ccl::kvs::pmix_abi;

static_assert(PMIX_MAX_NSLEN == mine::kMaxNsLen && PMIX_MAX_KEYLEN == mine::kMaxKeyLen);
static_assert(sizeof(pmix_status_t) == sizeof(mine::status_t));
static_assert(sizeof(pmix_rank_t) == sizeof(mine::rank_t));
static_assert(sizeof(pmix_data_type_t) == sizeof(mine::data_type_t));
static_assert(sizeof(pmix_scope_t) == sizeof(mine::scope_t));
static_assert(sizeof(pmix_info_directives_t) == sizeof(mine::info_directives_t));

static_assert(sizeof(pmix_proc_t) == sizeof(mine::proc_t));
static_assert(offsetof(pmix_proc_t, rank) == offsetof(mine::proc_t, rank));

static_assert(sizeof(pmix_value_t) == sizeof(mine::value_t));
static_assert(alignof(pmix_value_t) == alignof(mine::value_t));
static_assert(offsetof(pmix_value_t, data) == offsetof(mine::value_t, data));
static_assert(sizeof(pmix_value_t::data) == sizeof(mine::value_t::data));

static_assert(sizeof(pmix_info_t) == sizeof(mine::info_t));
static_assert(offsetof(pmix_info_t, flags) == offsetof(mine::info_t, flags));
static_assert(offsetof(pmix_info_t, value) == offsetof(mine::info_t, value));

static_assert(PMIX_SUCCESS == mine::kSuccess && PMIX_ERR_TIMEOUT == mine::kErrTimeout);
static_assert(PMIX_BOOL == mine::kBool && PMIX_STRING == mine::kString && PMIX_INT == mine::kInt);
static_assert(PMIX_GLOBAL == mine::kGlobal && PMIX_RANK_WILDCARD == mine::kRankWildcard);

TEST(PmixAbi, AttributeNames) {
    EXPECT_STREQ(PMIX_COLLECT_DATA, mine::kCollectData);
    EXPECT_STREQ(PMIX_TIMEOUT, mine::kTimeout);
}

// The members ccl writes land where libpmix reads them.
TEST(PmixAbi, MembersLandInPlace) {
    mine::value_t mine{};
    mine.type = mine::kString;
    char text[] = "10.0.0.1:4000";
    mine.data.string = text;
    const auto* real = reinterpret_cast<const pmix_value_t*>(&mine);
    EXPECT_EQ(real->type, PMIX_STRING);
    EXPECT_EQ(real->data.string, text);

    mine::info_t info{};
    info.value.type = mine::kInt;
    info.value.data.integer = 42;
    const auto* real_info = reinterpret_cast<const pmix_info_t*>(&info);
    EXPECT_EQ(real_info->value.type, PMIX_INT);
    EXPECT_EQ(real_info->value.data.integer, 42);
    info.value.type = mine::kBool;
    info.value.data.flag = true;
    EXPECT_TRUE(real_info->value.data.flag);
}

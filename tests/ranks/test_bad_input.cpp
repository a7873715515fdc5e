// Bad input gets its error code and a message, the process survives, and the communicator still
// works afterwards.
#include <cstdint>
#include <cstring>
#include <string>

#include "common.h"

using namespace test;

namespace {

TEST(BadInput, NullBuffers) {
    float x = 0;
    EXPECT_FAILS(ccl_allreduce(nullptr, &x, 1, CCL_FLOAT32, CCL_SUM, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "send");
    EXPECT_FAILS(ccl_allreduce(&x, nullptr, 1, CCL_FLOAT32, CCL_SUM, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "recv");
    EXPECT_FAILS(ccl_broadcast(nullptr, 4, CCL_FLOAT32, 0, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "buf");
    // NULL with count 0 is fine (and still collective).
    CCL_OK(ccl_allreduce(nullptr, nullptr, 0, CCL_FLOAT32, CCL_SUM, g_comm, nullptr, nullptr));
    expect_comm_still_works();
}

TEST(BadInput, InvalidTypeOpRoot) {
    float x = 0;
    EXPECT_FAILS(ccl_allreduce(&x, &x, 1, ccl_datatype_t(99), CCL_SUM, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "datatype");
    EXPECT_FAILS(ccl_allreduce(&x, &x, 1, ccl_datatype_t(-1), CCL_SUM, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "datatype");
    EXPECT_FAILS(
        ccl_allreduce(&x, &x, 1, CCL_FLOAT32, ccl_reduction_t(42), g_comm, nullptr, nullptr),
        CCL_ERROR_INVALID_ARGUMENT, "reduction");
    EXPECT_FAILS(ccl_broadcast(&x, 1, CCL_FLOAT32, -1, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "root");
    EXPECT_FAILS(ccl_broadcast(&x, 1, CCL_FLOAT32, g_size, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "root");
    EXPECT_FAILS(ccl_broadcast(&x, 1, ccl_datatype_t(12), 0, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "datatype");
    expect_comm_still_works();
}

TEST(BadInput, CountOverflow) {
    float x = 0;
    EXPECT_FAILS(
        ccl_allreduce(&x, &x, SIZE_MAX / 2, CCL_FLOAT32, CCL_SUM, g_comm, nullptr, nullptr),
        CCL_ERROR_INVALID_ARGUMENT, "overflow");
    EXPECT_FAILS(ccl_broadcast(&x, SIZE_MAX, CCL_INT16, 0, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "overflow");
    expect_comm_still_works();
}

TEST(BadInput, PartialOverlap) {
    float x[8] = {};
    EXPECT_FAILS(ccl_allreduce(x, x + 1, 4, CCL_FLOAT32, CCL_SUM, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "overlap");
    expect_comm_still_works();
}

TEST(BadInput, BadHandles) {
    float x = 0;
    int v = 0;
    EXPECT_FAILS(ccl_allreduce(&x, &x, 1, CCL_FLOAT32, CCL_SUM, nullptr, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "NULL");
    EXPECT_FAILS(ccl_comm_rank(nullptr, &v), CCL_ERROR_INVALID_ARGUMENT, "communicator");
    EXPECT_FAILS(ccl_comm_rank(g_comm, nullptr), CCL_ERROR_INVALID_ARGUMENT, "rank");
    EXPECT_FAILS(ccl_barrier(reinterpret_cast<ccl_comm_t>(uintptr_t(0xdead0)), nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "not valid");
    // A KVS handle is not a communicator.
    ccl_kvs_t kvs = nullptr;
    CCL_OK(ccl_kvs_create_main(&kvs));
    EXPECT_FAILS(ccl_barrier(reinterpret_cast<ccl_comm_t>(kvs), nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "not valid");
    // A destroyed communicator: a size-1 one made over a private KVS.
    ccl_comm_t solo = nullptr;
    CCL_OK(ccl_comm_create(1, 0, kvs, &solo));
    CCL_OK(ccl_allreduce(&x, &x, 1, CCL_FLOAT32, CCL_SUM, solo, nullptr, nullptr));
    CCL_OK(ccl_comm_destroy(solo));
    EXPECT_FAILS(ccl_allreduce(&x, &x, 1, CCL_FLOAT32, CCL_SUM, solo, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "destroyed");
    EXPECT_FAILS(ccl_comm_destroy(solo), CCL_ERROR_INVALID_ARGUMENT, "destroyed");
    CCL_OK(ccl_kvs_destroy(kvs));
    EXPECT_FAILS(ccl_kvs_destroy(kvs), CCL_ERROR_INVALID_ARGUMENT, "kvs");
    expect_comm_still_works();
}

// No handle value is accepted but one that ccl returned and that is still live: small integers
// (the first communicator's handle used to be 0x2), values next to a live handle, random values,
// the other handle types, and destroyed handles, also after their slot was reused, are all refused
// with CCL_ERROR_INVALID_ARGUMENT, and nothing crashes. Calls that would only read are used, so
// that a forged handle that got through could not start a collective.
TEST(BadInput, ForgedHandles) {
    int v = -1;
    int done = 0;
    char address[CCL_KVS_ADDRESS_MAX];
    auto refused = [&](uintptr_t value) {
        const ccl_result_t c = ccl_comm_rank(reinterpret_cast<ccl_comm_t>(value), &v);
        const ccl_result_t r = ccl_test(reinterpret_cast<ccl_request_t>(value), &done);
        const ccl_result_t k =
            ccl_kvs_get_address(reinterpret_cast<ccl_kvs_t>(value), address, sizeof address);
        return c == CCL_ERROR_INVALID_ARGUMENT && r == CCL_ERROR_INVALID_ARGUMENT &&
               k == CCL_ERROR_INVALID_ARGUMENT;
    };
    EXPECT_TRUE(refused(0x2)) << "(ccl_comm_t)0x2 was taken for a live handle";
    for (uintptr_t i = 1; i <= uintptr_t(1) << 20; i += i < 4096 ? 1 : 257)
        ASSERT_TRUE(refused(i)) << "the small integer " << i << " was taken for a live handle";
    // Next to a live communicator and request: one bit flipped, or a small step away.
    ccl_request_t req = nullptr;
    float x = 1;
    CCL_OK(ccl_allreduce(&x, &x, 1, CCL_FLOAT32, CCL_SUM, g_comm, nullptr, &req));
    CCL_OK(ccl_wait(req));
    for (uintptr_t live : {reinterpret_cast<uintptr_t>(g_comm), reinterpret_cast<uintptr_t>(req)}) {
        for (int bit = 0; bit < int(8 * sizeof(uintptr_t)); ++bit)
            EXPECT_TRUE(refused(live ^ (uintptr_t(1) << bit)))
                << std::hex << live << " bit " << bit;
        for (uintptr_t d = 1; d <= 256; ++d) {
            EXPECT_TRUE(refused(live + d)) << std::hex << live << " + " << d;
            EXPECT_TRUE(refused(live - d)) << std::hex << live << " - " << d;
        }
    }
    // A live request is no communicator, and the reverse.
    EXPECT_FAILS(ccl_comm_rank(reinterpret_cast<ccl_comm_t>(req), &v), CCL_ERROR_INVALID_ARGUMENT,
                 "not valid");
    EXPECT_FAILS(ccl_test(reinterpret_cast<ccl_request_t>(g_comm), &done),
                 CCL_ERROR_INVALID_ARGUMENT, "not valid");
    CCL_OK(ccl_request_free(req));
    EXPECT_TRUE(refused(reinterpret_cast<uintptr_t>(req))) << "a freed request";
    // Random values.
    uint64_t state = 0x9e3779b97f4a7c15ull ^ uint64_t(g_rank);
    for (int i = 0; i < 5000; ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const uintptr_t value = uintptr_t(state ^ (state >> 29));
        ASSERT_TRUE(refused(value)) << "the random value " << std::hex << value;
    }
    // Destroyed handles stay refused while their slot is reused by new communicators.
    ccl_kvs_t kvs = nullptr;
    CCL_OK(ccl_kvs_create_main(&kvs));
    std::vector<ccl_comm_t> stale;
    for (int i = 0; i < 20; ++i) {
        ccl_comm_t solo = nullptr;
        CCL_OK(ccl_comm_create(1, 0, kvs, &solo));
        CCL_OK(ccl_comm_rank(solo, &v));
        for (ccl_comm_t old : stale) {
            EXPECT_NE(old, solo);
            EXPECT_FAILS(ccl_comm_rank(old, &v), CCL_ERROR_INVALID_ARGUMENT, "destroyed");
            EXPECT_FAILS(ccl_comm_destroy(old), CCL_ERROR_INVALID_ARGUMENT, "destroyed");
        }
        CCL_OK(ccl_comm_destroy(solo));
        stale.push_back(solo);
    }
    CCL_OK(ccl_kvs_destroy(kvs));
    EXPECT_TRUE(refused(reinterpret_cast<uintptr_t>(kvs))) << "a destroyed KVS";
    expect_comm_still_works();
}

TEST(BadInput, CommCreateArguments) {
    ccl_kvs_t kvs = nullptr;
    CCL_OK(ccl_kvs_create_main(&kvs));
    ccl_comm_t c = nullptr;
    EXPECT_FAILS(ccl_comm_create(0, 0, kvs, &c), CCL_ERROR_INVALID_ARGUMENT, "size");
    EXPECT_FAILS(ccl_comm_create(2, 2, kvs, &c), CCL_ERROR_INVALID_ARGUMENT, "rank");
    EXPECT_FAILS(ccl_comm_create(2, -1, kvs, &c), CCL_ERROR_INVALID_ARGUMENT, "rank");
    EXPECT_FAILS(ccl_comm_create(1, 0, kvs, nullptr), CCL_ERROR_INVALID_ARGUMENT, "comm");
    EXPECT_FAILS(ccl_comm_create(1, 0, nullptr, &c), CCL_ERROR_INVALID_ARGUMENT, "kvs");
    char small[4];
    EXPECT_FAILS(ccl_kvs_get_address(kvs, small, sizeof(small)), CCL_ERROR_INVALID_ARGUMENT, "buf");
    char address[CCL_KVS_ADDRESS_MAX];
    CCL_OK(ccl_kvs_get_address(kvs, address, sizeof(address)));
    EXPECT_NE(std::strchr(address, ':'), nullptr) << address;
    CCL_OK(ccl_kvs_destroy(kvs));
    ccl_kvs_t k2 = nullptr;
    EXPECT_FAILS(ccl_kvs_connect("not an address", &k2), CCL_ERROR_INVALID_ARGUMENT, "address");
    EXPECT_FAILS(ccl_kvs_connect(nullptr, &k2), CCL_ERROR_INVALID_ARGUMENT, "address");
}

TEST(BadInput, AttrAndRequest) {
    float x = 1;
    ccl_coll_attr_t attr = CCL_COLL_ATTR_INIT;
    CCL_OK(ccl_allreduce(&x, &x, 1, CCL_FLOAT32, CCL_SUM, g_comm, &attr, nullptr));
    ccl_coll_attr_t zero;
    std::memset(&zero, 0, sizeof(zero));
    EXPECT_FAILS(ccl_allreduce(&x, &x, 1, CCL_FLOAT32, CCL_SUM, g_comm, &zero, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "CCL_COLL_ATTR_INIT");
    // Caching needs a name.
    ccl_coll_attr_t cached = CCL_COLL_ATTR_INIT;
    cached.to_cache = 1;
    EXPECT_FAILS(ccl_allreduce(&x, &x, 1, CCL_FLOAT32, CCL_SUM, g_comm, &cached, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "match_id");
    cached.match_id = "";
    EXPECT_FAILS(ccl_allreduce(&x, &x, 1, CCL_FLOAT32, CCL_SUM, g_comm, &cached, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "match_id");
    // A refused nonblocking call leaves *req alone.
    ccl_request_t req = nullptr;
    EXPECT_FAILS(ccl_allreduce(nullptr, &x, 1, CCL_FLOAT32, CCL_SUM, g_comm, nullptr, &req),
                 CCL_ERROR_INVALID_ARGUMENT, "send");
    EXPECT_EQ(req, nullptr);
    expect_comm_still_works();
}

TEST(BadInput, VersionAndStrings) {
    int a, b, c;
    CCL_OK(ccl_get_version(&a, &b, &c));
    EXPECT_EQ(a, CCL_VERSION_MAJOR);
    EXPECT_FAILS(ccl_get_version(nullptr, &b, &c), CCL_ERROR_INVALID_ARGUMENT, "major");
    EXPECT_STREQ(ccl_strerror(CCL_ERROR_TIMEOUT), "timed out");
    EXPECT_STREQ(ccl_strerror(ccl_result_t(1234)), "unknown result code");
}

// Ranks that disagree on the collective get an error, never a wrong result. Last: it breaks the
// communicator it runs on, so it uses one of its own.
TEST(BadInput, MismatchedCollectives) {
    if (g_size < 2) GTEST_SKIP() << "needs two ranks";
    ccl_comm_t c = nullptr;
    CCL_OK(ccl_comm_create_from_env(&c));
    float x = 1;
    ccl_result_t r = g_rank == 0
                         ? ccl_barrier(c, nullptr)
                         : ccl_allreduce(&x, &x, 1, CCL_FLOAT32, CCL_SUM, c, nullptr, nullptr);
    EXPECT_TRUE(r == CCL_ERROR_INVALID_USAGE) << ccl_strerror(r) << ": " << ccl_last_error();
    // The communicator is now broken, and says so.
    EXPECT_EQ(ccl_barrier(c, nullptr), r);
    EXPECT_NE(std::string(ccl_last_error()).find("broken"), std::string::npos) << ccl_last_error();
    CCL_OK(ccl_comm_destroy(c));
    expect_comm_still_works();
}

}  // namespace

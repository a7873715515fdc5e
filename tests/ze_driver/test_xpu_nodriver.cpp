// ccl without Level Zero. With no driver at all (zeInit fails) host buffers work and streams are
// refused. With ccl's Level Zero off while the application has device memory (here:
// CCL_ZE_LIBRARY_PATH names no loader, and the test allocates through the real one), a device
// buffer gets a clear error instead of a crash.
#include "common.h"
#include "reference.h"
#include "ze_helpers.h"

namespace test {
namespace {

TEST(NoDriver, HostBuffersWork) {
    expect_comm_still_works();
    const size_t count = large_count(CCL_FLOAT32);
    std::vector<char> in(count * 4), out(count * 4);
    fill(in.data(), count, CCL_FLOAT32, g_rank, 7);
    CCL_OK(ccl_allreduce(in.data(), out.data(), count, CCL_FLOAT32, CCL_SUM, g_comm, nullptr,
                         nullptr));
    check_reduced(out.data(), count, CCL_FLOAT32, CCL_SUM, 7, g_size, 0, "host allreduce");
}

TEST(NoDriver, StreamsAreRefused) {
    int dummy = 0;
    ccl_stream_t s = nullptr;
    EXPECT_FAILS(
        ccl_stream_create_ze(CCL_STREAM_ZE_IMMEDIATE_COMMAND_LIST, &dummy, &dummy, &dummy, &s),
        CCL_ERROR_UNSUPPORTED, "Level Zero");
}

TEST(NoDriver, DeviceBufferGetsAClearError) {
    if (!ze().ok)
        GTEST_SKIP() << "no Level Zero driver in this run: nothing can make device memory";
    Buf d(Mem::device, 4096);
    ASSERT_FALSE(host_readable(d.data()));
    std::vector<float> host(1024, 1.0f);
    EXPECT_FAILS(
        ccl_allreduce(d.data(), host.data(), 1024, CCL_FLOAT32, CCL_SUM, g_comm, nullptr, nullptr),
        CCL_ERROR_INVALID_ARGUMENT, "not readable");
    EXPECT_FAILS(ccl_broadcast(d.data(), 1024, CCL_FLOAT32, 0, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "XPU support is off");
    // Refused before any rank started: the communicator is fine.
    expect_comm_still_works();
}

}  // namespace
}  // namespace test

// copy_out: the streamed copy equals memcpy at every alignment and length around its edges.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "shm/copy.h"

TEST(CopyOut, StreamedEqualsMemcpy) {
    std::vector<uint8_t> src(1 << 17), dst(src.size() + 128);
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 131 + 7);
    for (size_t n : {size_t(0), size_t(1), size_t(4095), size_t(4096), size_t(4097),
                     size_t(65536 + 13), src.size() - 64}) {
        for (size_t dst_at : {0, 1, 17, 63, 64}) {
            for (size_t src_at : {0, 5, 64}) {
                for (bool stream : {false, true}) {
                    std::fill(dst.begin(), dst.end(), 0xEE);
                    ccl::shm::copy_out(dst.data() + dst_at, src.data() + src_at, n, stream);
                    for (size_t i = 0; i < dst_at; ++i) ASSERT_EQ(dst[i], 0xEE);
                    for (size_t i = 0; i < n; ++i)
                        ASSERT_EQ(dst[dst_at + i], src[src_at + i])
                            << "n " << n << " dst+" << dst_at << " src+" << src_at << " at " << i;
                    for (size_t i = dst_at + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE);
                }
            }
        }
    }
}

// copy_out: the streamed copy, and the large one, equal memcpy at every alignment and length around
// their edges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
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

// Copies from the L2's size up (rep movsb on AMD cpus, copy.cpp): equal to memcpy at odd
// lengths and alignments.
TEST(CopyOut, LargeEqualsMemcpy) {
    std::vector<uint8_t> src((size_t(3) << 20) + 256), dst(src.size() + 128);
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 131 + 7);
    for (size_t n : {size_t(1) << 20, (size_t(1) << 20) + 13, (size_t(3) << 20) + 5}) {
        for (size_t dst_at : {0, 3, 64}) {
            for (size_t src_at : {0, 9}) {
                std::fill(dst.begin(), dst.end(), 0xEE);
                ccl::shm::copy_out(dst.data() + dst_at, src.data() + src_at, n, false);
                for (size_t i = 0; i < dst_at; ++i) ASSERT_EQ(dst[i], 0xEE);
                ASSERT_EQ(std::memcmp(dst.data() + dst_at, src.data() + src_at, n), 0)
                    << "n " << n << " dst+" << dst_at << " src+" << src_at;
                for (size_t i = dst_at + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE);
            }
        }
    }
}

// An exchange's own block streams where the whole output is large (as every copy-out) or where
// the block alone fills a cache piece; not below both.
TEST(CopyOut, OwnBlockStreamsFromACachePieceOrALargeOutput) {
    using namespace ccl::shm;
    const size_t piece = cache_piece_bytes();
    ASSERT_GT(piece, 0u);
    if (piece - 1 < kStreamMinBytes) {
        EXPECT_FALSE(stream_own_block(piece - 1, piece - 1));
    }
    EXPECT_TRUE(stream_own_block(piece, piece));
    EXPECT_TRUE(stream_own_block(64, kStreamMinBytes));
    EXPECT_FALSE(stream_own_block(64, std::min(piece, kStreamMinBytes) - 1));
}

// copy_message (rep movsb from 2 KiB to 16 KiB where the cpu has ERMS, else memcpy): every byte
// at every size around its bounds, at odd alignments, and nothing outside.
TEST(CopyMessage, EqualsMemcpy) {
    std::vector<uint8_t> src((size_t(20) << 10) + 64), dst(src.size() + 128);
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 29 + 3);
    for (size_t n : {size_t(0), size_t(1), size_t(2047), size_t(2048), size_t(4096), size_t(4099),
                     size_t(16) << 10, (size_t(16) << 10) + 1, size_t(20) << 10}) {
        for (size_t dst_at : {0, 5}) {
            for (size_t src_at : {0, 11}) {
                std::fill(dst.begin(), dst.end(), 0xEE);
                ccl::shm::copy_message(dst.data() + dst_at, src.data() + src_at, n);
                for (size_t i = 0; i < dst_at; ++i) ASSERT_EQ(dst[i], 0xEE);
                ASSERT_EQ(std::memcmp(dst.data() + dst_at, src.data() + src_at, n), 0)
                    << "n " << n << " dst+" << dst_at << " src+" << src_at;
                for (size_t i = dst_at + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE);
            }
        }
    }
}

// demote only hints (CLDEMOTE where the cpu has it): every range, odd starts and lengths, up to
// the ends of a buffer, leaves the memory as it was.
TEST(Demote, LeavesMemoryAsItWas) {
    std::vector<uint8_t> buf(size_t(8) << 10);
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = uint8_t(i * 37 + 1);
    const std::vector<uint8_t> before = buf;
    for (size_t at : {size_t(0), size_t(1), size_t(63), size_t(64), size_t(100)})
        for (size_t n : {size_t(0), size_t(1), size_t(64), size_t(65), ccl::shm::kDemoteMaxBytes})
            if (at + n <= buf.size()) ccl::shm::demote(buf.data() + at, n);
    ccl::shm::demote(buf.data() + buf.size() - 1, 1);
    EXPECT_EQ(buf, before);
}

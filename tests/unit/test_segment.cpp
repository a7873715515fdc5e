// Shared-memory segments: created 0600, and a segment whose header, size, owner or permissions
// disagree with what the opener expects is refused with an error naming it.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "shm/segment.h"

namespace {

using ccl::shm::JobId;
using ccl::shm::Segment;

const JobId kJob{0xaa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xbb};

std::string unique_name() {
    static std::atomic<int> n{0};
    return "/ccl-" + std::to_string(getpid()) + "-segtest-" + std::to_string(n++);
}

// The error open() throws, or a failure when it throws none.
ccl::Error open_error(const std::string& name, size_t size, const JobId& job) {
    try {
        Segment s = Segment::open(name, size, job);
    } catch (const ccl::Error& e) {
        return e;
    }
    ADD_FAILURE() << "open of " << name << " succeeded";
    return ccl::Error(CCL_ERROR_INTERNAL, "none");
}

void expect_refused(const std::string& name, size_t size, const JobId& job, const char* why) {
    ccl::Error e = open_error(name, size, job);
    EXPECT_EQ(e.code(), CCL_ERROR_INVALID_USAGE) << e.what();
    std::string what = e.what();
    EXPECT_NE(what.find(name), std::string::npos) << what;  // names the segment
    EXPECT_NE(what.find(why), std::string::npos) << what;
}

// Overwrites `len` bytes at `offset` of the named segment, as a stranger (or a bug) would.
void scribble(const std::string& name, size_t offset, const void* bytes, size_t len) {
    int fd = shm_open(name.c_str(), O_RDWR, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, bytes, len, off_t(offset)), ssize_t(len));
    close(fd);
}

TEST(Segment, CreatedOwnerOnly) {
    mode_t old = umask(0);  // even with a permissive umask
    std::string name = unique_name();
    Segment s = Segment::create(name, 4096, kJob);
    umask(old);
    struct stat st {};
    ASSERT_EQ(stat(("/dev/shm" + name).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(st.st_uid, geteuid());
    EXPECT_EQ(size_t(st.st_size), Segment::kHeaderBytes + 4096);
}

TEST(Segment, OpenChecksTheHeader) {
    std::string name = unique_name();
    Segment s = Segment::create(name, 8192, kJob);
    static_cast<char*>(s.data())[0] = 'x';
    {
        Segment ok = Segment::open(name, 8192, kJob);  // the right job, size and version
        EXPECT_EQ(static_cast<char*>(ok.data())[0], 'x');
        EXPECT_EQ(ok.size(), 8192u);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(ok.data()) % 4096, 0u);
    }
    JobId other = kJob;
    other[7] ^= 1;
    expect_refused(name, 8192, other, "belongs to job");
    expect_refused(name, 4096, kJob, "bytes, expected");  // wrong size (the file's)

    // A header that lies about the size while the file's size is right.
    uint64_t bad_size = 4096;
    scribble(name, 16, &bad_size, sizeof bad_size);
    expect_refused(name, 8192, kJob, "header says 4096 bytes");
    uint64_t good_size = 8192;
    scribble(name, 16, &good_size, sizeof good_size);
    EXPECT_NO_THROW(Segment::open(name, 8192, kJob));

    uint32_t bad_version = Segment::kVersion + 1;
    scribble(name, 8, &bad_version, sizeof bad_version);
    expect_refused(name, 8192, kJob, "layout version");
    uint32_t version = Segment::kVersion;
    scribble(name, 8, &version, sizeof version);
    EXPECT_NO_THROW(Segment::open(name, 8192, kJob));

    scribble(name, 0, "garbage!", 8);
    expect_refused(name, 8192, kJob, "bad magic");
}

TEST(Segment, OpenRefusesOpenPermissions) {
    std::string name = unique_name();
    Segment s = Segment::create(name, 4096, kJob);
    ASSERT_EQ(chmod(("/dev/shm" + name).c_str(), 0666), 0);
    expect_refused(name, 4096, kJob, "permissions are 666");
    ASSERT_EQ(chmod(("/dev/shm" + name).c_str(), 0600), 0);
    EXPECT_NO_THROW(Segment::open(name, 4096, kJob));
}

TEST(Segment, OpenRefusesAForeignFile) {
    // Something that is not a ccl segment at all, with a plausible size.
    std::string name = unique_name();
    int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, off_t(Segment::kHeaderBytes + 4096)), 0);
    close(fd);
    expect_refused(name, 4096, kJob, "bad magic");
    shm_unlink(name.c_str());
}

}  // namespace

// Shared-memory segments: created 0600, and a segment whose header, size, owner or permissions
// disagree with what the opener expects is refused with an error naming it. Processes are told
// apart from later ones with their pid; the segments of processes that are gone are removed (by
// the scan, by an opener), never those of a live one.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "shm/segment.h"

namespace {

using ccl::ProcessId;
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

// A child that has exited: reaped (`reap`: its pid is free) or a zombie (not reaped yet).
pid_t exited_child(bool reap) {
    pid_t pid = -1;
    char arg0[] = "true";
    char* argv[] = {arg0, nullptr};
    if (posix_spawnp(&pid, "true", nullptr, nullptr, argv, environ) != 0) return -1;
    siginfo_t info{};
    // Until it has exited, without reaping it.
    if (waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0) return -1;
    if (reap) waitpid(pid, nullptr, 0);
    return pid;
}

TEST(ProcessId, TellsALaterProcessWithTheSamePid) {
    const ProcessId me = ccl::this_process();
    EXPECT_EQ(me.pid, getpid());
    EXPECT_NE(me.start, 0u);
    EXPECT_TRUE(ccl::process_alive(me));
    EXPECT_TRUE(ccl::process_alive(ProcessId{me.pid, 0}));              // the pid alone
    EXPECT_FALSE(ccl::process_alive(ProcessId{me.pid, me.start + 1}));  // another process, same pid
    EXPECT_FALSE(ccl::process_alive(ProcessId{0, 0}));
    const pid_t gone = exited_child(true), zombie = exited_child(false);
    ASSERT_GT(gone, 0);
    ASSERT_GT(zombie, 0);
    EXPECT_FALSE(ccl::process_alive(ProcessId{gone, 0}));
    EXPECT_FALSE(ccl::process_alive(ProcessId{zombie, 0})) << "a zombie holds nothing";
    waitpid(zombie, nullptr, 0);
    EXPECT_NE(ccl::shm::pid_namespace(), 0u);
}

// Makes the named segment look `seconds` old (its modification time).
void age(const std::string& name, int seconds) {
    struct timespec times[2];
    clock_gettime(CLOCK_REALTIME, &times[0]);
    times[0].tv_sec -= seconds;
    times[1] = times[0];
    ASSERT_EQ(utimensat(AT_FDCWD, ("/dev/shm" + name).c_str(), times, 0), 0) << name;
}

bool exists(const std::string& name) { return access(("/dev/shm" + name).c_str(), F_OK) == 0; }

// Header offsets (shm/segment.cpp): creator pid at 40, its start time at 48, its pid namespace
// at 56.
void set_creator(const std::string& name, int32_t pid, uint64_t start) {
    scribble(name, 40, &pid, sizeof pid);
    scribble(name, 48, &start, sizeof start);
}

std::vector<std::string> removed_names(const std::vector<ccl::shm::StaleSegment>& removed) {
    std::vector<std::string> names;
    for (const auto& s : removed) names.push_back("/" + s.name);
    std::sort(names.begin(), names.end());
    return names;
}

TEST(Segment, StaleSegmentsOfProcessesThatAreGoneAreRemoved) {
    const std::string prefix = "ccl-" + std::to_string(getpid()) + "-stale-";
    const pid_t gone = exited_child(true);
    ASSERT_GT(gone, 0);
    const ProcessId me = ccl::this_process();
    auto name = [&](const char* what) { return "/" + prefix + what; };
    Segment live = Segment::create(name("live"), 4096, kJob);
    Segment dead = Segment::create(name("dead"), 8192, kJob);
    Segment reused = Segment::create(name("reused"), 4096, kJob);
    Segment young = Segment::create(name("young"), 4096, kJob);
    Segment foreign = Segment::create(name("foreign"), 4096, kJob);
    set_creator(name("dead"), gone, 12345);
    set_creator(name("reused"), me.pid, me.start + 1);  // this pid, another process
    set_creator(name("young"), gone, 0);
    set_creator(name("foreign"), gone, 0);
    const uint64_t other_ns = ccl::shm::pid_namespace() + 1;
    scribble(name("foreign"), 56, &other_ns, sizeof other_ns);
    // Without a header: a creator that died while making it, and one that is making it now.
    const std::string headerless_dead =
        "/ccl-" + std::to_string(gone) + "-stale-" + std::to_string(getpid()) + "-headerless";
    for (const std::string& n : {headerless_dead, name("headerless")}) {
        int fd = shm_open(n.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
        ASSERT_GE(fd, 0) << n;
        close(fd);
        age(n, 60);
    }
    for (const char* n : {"live", "dead", "reused", "foreign"}) age(name(n), 60);

    auto removed = ccl::shm::remove_stale_segments(ccl::shm::kStaleAge, prefix);
    EXPECT_EQ(removed_names(removed), (std::vector<std::string>{name("dead"), name("reused")}));
    for (const auto& s : removed)
        if (s.name == prefix + "dead") {
            EXPECT_EQ(s.creator, gone);
            EXPECT_EQ(s.bytes, Segment::kHeaderBytes + 8192);
        }
    EXPECT_TRUE(exists(name("live")));
    EXPECT_TRUE(exists(name("young")));    // its creator is gone, but it is new
    EXPECT_TRUE(exists(name("foreign")));  // its creator cannot be seen from here
    EXPECT_TRUE(exists(name("headerless")));
    EXPECT_FALSE(exists(name("dead")));
    // Young ones go once old enough; a live creator's never.
    removed = ccl::shm::remove_stale_segments(std::chrono::seconds(0), prefix);
    EXPECT_EQ(removed_names(removed), (std::vector<std::string>{name("young")}));
    EXPECT_TRUE(exists(name("live")));
    // The headerless one of a gone pid.
    removed = ccl::shm::remove_stale_segments(ccl::shm::kStaleAge,
                                              "ccl-" + std::to_string(gone) + "-stale-");
    ASSERT_EQ(removed.size(), 1u);
    EXPECT_EQ("/" + removed[0].name, headerless_dead);
    EXPECT_EQ(removed[0].creator, 0);
    shm_unlink(name("headerless").c_str());
}

// An opener that lets a segment go removes its name where the creator is gone (rank 0 killed
// while the others were mapping), not while the creator lives.
TEST(Segment, AnOpenerRemovesTheNameOfACreatorThatIsGone) {
    const std::string name = unique_name();
    Segment made = Segment::create(name, 4096, kJob);
    made.disown({});  // as if another process had made it
    { Segment opened = Segment::open(name, 4096, kJob); }
    EXPECT_TRUE(exists(name));
    const pid_t gone = exited_child(true);
    ASSERT_GT(gone, 0);
    set_creator(name, gone, 0);
    { Segment opened = Segment::open(name, 4096, kJob); }
    EXPECT_FALSE(exists(name));
}

// A segment its creator let go of for another process (a sender's unreceived messages, for
// their receiver) stays while that process runs, though its creator is gone.
TEST(Segment, AnHeirKeepsASegmentWhoseCreatorIsGone) {
    const std::string prefix = "ccl-" + std::to_string(getpid()) + "-heir-";
    const pid_t gone = exited_child(true);
    ASSERT_GT(gone, 0);
    Segment kept = Segment::create("/" + prefix + "kept", 4096, kJob);
    Segment lost = Segment::create("/" + prefix + "lost", 4096, kJob);
    kept.disown(ccl::this_process());
    lost.disown({gone, 0});
    for (const char* n : {"kept", "lost"}) {
        set_creator("/" + prefix + n, gone, 0);
        age("/" + prefix + n, 60);
    }
    const auto removed = ccl::shm::remove_stale_segments(ccl::shm::kStaleAge, prefix);
    EXPECT_EQ(removed_names(removed), (std::vector<std::string>{"/" + prefix + "lost"}));
    EXPECT_TRUE(exists("/" + prefix + "kept"));
    shm_unlink(("/" + prefix + "kept").c_str());
}

}  // namespace

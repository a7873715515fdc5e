#include "shm/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "base/error.h"
#include "base/hex.h"
#include "base/log.h"

namespace ccl::shm {

namespace {

constexpr char kMagic[8] = {'c', 'c', 'l', '-', 's', 'h', 'm', '\0'};

// At offset 0 of every segment. Written once by the creator, first thing after making the name
// (so that a scan for stale segments finds the creator in all but a segment's first moments).
struct Header {
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;
    uint64_t size;  // bytes after the header
    uint8_t job[16];
    int32_t creator_pid;  // at 40 in every version
    uint32_t unused;
    uint64_t creator_start;  // ProcessId::start (from version 2)
    uint64_t creator_pidns;  // pid_namespace() (from version 2)
    // Who else keeps the segment alive once its creator let go of it without removing it (a
    // sender's unreceived messages: their receiver), 0 if nobody; written by the creator.
    int32_t heir_pid;
    uint32_t unused2;
    uint64_t heir_start;
};
static_assert(sizeof(Header) <= Segment::kHeaderBytes);
static_assert(offsetof(Header, creator_pid) == 40 && offsetof(Header, creator_start) == 48 &&
              offsetof(Header, creator_pidns) == 56);  // tests/unit/test_segment.cpp writes them

// Closes a descriptor when it goes out of scope.
struct Fd {
    int fd;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

void* map(int fd, size_t size, const std::string& name) {
    // Populated up front: a page fault per 4 KiB page on first touch costs more than the copy
    // itself (tens of microseconds each in some virtual machines).
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) throw_errno("mmap of shared-memory segment " + name);
    return p;
}

}  // namespace

uint64_t pid_namespace() {
    static const uint64_t ns = [] {
        struct stat st {};
        return ::stat("/proc/self/ns/pid", &st) == 0 ? uint64_t(st.st_ino) : 0;
    }();
    return ns;
}

Segment::Segment(std::string name, void* base, size_t size, bool owner, const JobId& job)
    : name_(std::move(name)),
      base_(base),
      data_(base ? static_cast<char*>(base) + kHeaderBytes : nullptr),
      size_(size),
      owner_(owner),
      job_(job) {}

Segment Segment::create(const std::string& name, size_t size, const JobId& job) {
    Fd fd{::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600)};
    if (fd.fd < 0) throw_errno("shm_open(" + name + ", O_CREAT)");
    // From here on the name exists: unlink it again if anything below fails.
    Segment seg(name, nullptr, 0, true, job);
    seg.creator_ = this_process();
    // 0600 whatever the umask: the openers need read and write, nobody else anything.
    if (::fchmod(fd.fd, 0600) != 0) throw_errno("fchmod of " + name);
    // The header first: whoever finds the name from now on can tell whose it is.
    Header h{};
    std::memcpy(h.magic, kMagic, sizeof(kMagic));
    h.version = kVersion;
    h.header_bytes = kHeaderBytes;
    h.size = size;
    std::memcpy(h.job, job.data(), job.size());
    h.creator_pid = seg.creator_.pid;
    h.creator_start = seg.creator_.start;
    h.creator_pidns = pid_namespace();
    if (::pwrite(fd.fd, &h, sizeof(h), 0) != ssize_t(sizeof(h)))
        throw_errno("writing the header of " + name);
    size_t total = kHeaderBytes + size;
    if (::ftruncate(fd.fd, off_t(total)) != 0) throw_errno("ftruncate of " + name);
    if (int err = ::posix_fallocate(fd.fd, 0, off_t(total)); err != 0)
        throw_errno("reserving " + std::to_string(total) + " bytes of shared memory for " + name +
                        " (is /dev/shm full? see CCL_SHM_BUFFER_SIZE)",
                    err);
    seg.base_ = map(fd.fd, total, name);
    seg.data_ = static_cast<char*>(seg.base_) + kHeaderBytes;
    seg.size_ = size;
    return seg;
}

Segment Segment::open(const std::string& name, size_t size, const JobId& job) {
    Fd fd{::shm_open(name.c_str(), O_RDWR, 0)};
    if (fd.fd < 0) throw_errno("shm_open(" + name + ")");
    auto refuse = [&](const std::string& why) {
        return Error(CCL_ERROR_INVALID_USAGE,
                     "refusing shared-memory segment " + name + ": " + why);
    };
    struct stat st {};
    if (::fstat(fd.fd, &st) != 0) throw_errno("fstat of " + name);
    // Someone else's segment, or one others may write, could be tampered with under us.
    if (st.st_uid != ::geteuid())
        throw refuse("owned by uid " + std::to_string(st.st_uid) + ", not this process's " +
                     std::to_string(::geteuid()));
    if ((st.st_mode & 0777) != 0600) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%03o", unsigned(st.st_mode & 0777));
        throw refuse(std::string("its permissions are ") + mode + ", not 600");
    }
    size_t total = kHeaderBytes + size;
    if (size_t(st.st_size) != total)
        throw refuse("it has " + std::to_string(st.st_size) + " bytes, expected " +
                     std::to_string(total) + " (" + std::to_string(size) +
                     " after the header): another job's, or a different configuration");
    Segment seg(name, map(fd.fd, total, name), size, false, job);
    Header h;
    std::memcpy(&h, seg.base_, sizeof(h));
    if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0)
        throw refuse("no ccl segment header (bad magic)");
    if (h.version != kVersion || h.header_bytes != kHeaderBytes)
        throw refuse("layout version " + std::to_string(h.version) + ", this ccl reads version " +
                     std::to_string(kVersion) + " (mixed ccl versions in one job?)");
    if (h.size != size)
        throw refuse("its header says " + std::to_string(h.size) + " bytes, expected " +
                     std::to_string(size));
    if (std::memcmp(h.job, job.data(), job.size()) != 0)
        throw refuse("it belongs to job " + to_hex(h.job, sizeof(h.job)) + " (created by pid " +
                     std::to_string(h.creator_pid) + "), not to this one " +
                     to_hex(job.data(), job.size()));
    // Ours: from here on its name goes with this object if its creator is gone (a refused one
    // is never touched).
    seg.creator_ = {h.creator_pid, h.creator_start};
    seg.opened_ = true;
    return seg;
}

Segment::Segment(Segment&& other) noexcept
    : name_(std::move(other.name_)),
      base_(std::exchange(other.base_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      owner_(std::exchange(other.owner_, false)),
      opened_(std::exchange(other.opened_, false)),
      job_(other.job_),
      creator_(other.creator_) {}

Segment& Segment::operator=(Segment&& other) noexcept {
    if (this != &other) {
        release();
        name_ = std::move(other.name_);
        base_ = std::exchange(other.base_, nullptr);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        owner_ = std::exchange(other.owner_, false);
        opened_ = std::exchange(other.opened_, false);
        job_ = other.job_;
        creator_ = other.creator_;
    }
    return *this;
}

Segment::~Segment() { release(); }

void Segment::unlink() {
    if (owner_ || opened_) ::shm_unlink(name_.c_str());
    owner_ = opened_ = false;
}

void Segment::remove(const std::string& name) { ::shm_unlink(name.c_str()); }

void Segment::release() noexcept {
    if (base_) ::munmap(base_, kHeaderBytes + size_);
    base_ = nullptr;
    data_ = nullptr;
    // An opener removes a name its creator is no longer there to remove (nobody else will open
    // it: the creator's job has failed).
    if (owner_ || (opened_ && !process_alive(creator_))) ::shm_unlink(name_.c_str());
    owner_ = opened_ = false;
}

void Segment::disown(const ProcessId& heir) {
    if (base_) {
        Header* h = static_cast<Header*>(base_);
        h->heir_start = heir.start;
        h->heir_pid = heir.pid;
    }
    owner_ = false;
}

namespace {

// Whose a segment found in /dev/shm is (nothing: no ccl header), from the open file.
struct Found {
    ProcessId creator, heir;
    uint64_t pidns = 0;  // 0: unknown
};
std::optional<Found> creator_of(int fd) {
    Header h{};
    if (::pread(fd, &h, sizeof(h), 0) != ssize_t(sizeof(h)) ||
        std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 || h.creator_pid <= 0)
        return std::nullopt;
    if (h.version < 2) return Found{{h.creator_pid, 0}, 0};  // the pid only
    return Found{{h.creator_pid, h.creator_start}, {h.heir_pid, h.heir_start}, h.creator_pidns};
}

// The pid in a name "ccl-<pid>-...", or 0.
int32_t pid_in_name(const char* name) {
    if (std::strncmp(name, "ccl-", 4) != 0) return 0;
    char* end = nullptr;
    const long pid = std::strtol(name + 4, &end, 10);
    return end != name + 4 && *end == '-' && pid > 0 && pid <= INT32_MAX ? int32_t(pid) : 0;
}

}  // namespace

std::vector<StaleSegment> remove_stale_segments(std::chrono::seconds min_age,
                                                const std::string& prefix) {
    std::vector<StaleSegment> removed;
    struct CloseDir {
        void operator()(DIR* d) const { ::closedir(d); }
    };
    std::unique_ptr<DIR, CloseDir> dir(::opendir("/dev/shm"));
    if (!dir) return removed;
    const int dfd = ::dirfd(dir.get());
    struct timespec now {};
    ::clock_gettime(CLOCK_REALTIME, &now);
    while (const dirent* e = ::readdir(dir.get())) {
        const char* name = e->d_name;
        if (std::strncmp(name, prefix.c_str(), prefix.size()) != 0) continue;
        if (e->d_type != DT_REG && e->d_type != DT_UNKNOWN) continue;
        Fd fd{::openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
        struct stat st {};
        if (fd.fd < 0 || ::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != ::geteuid())
            continue;
        if (now.tv_sec - st.st_mtim.tv_sec < min_age.count()) continue;
        int32_t pid = 0;
        if (const auto found = creator_of(fd.fd)) {
            if (found->pidns != 0 && pid_namespace() != 0 && found->pidns != pid_namespace())
                continue;  // its creator is out of sight
            if (process_alive(found->creator) ||
                (found->heir.pid > 0 && process_alive(found->heir)))
                continue;
            pid = found->creator.pid;
        } else {
            // Its creator died between making the name and writing the header; or it is not ours.
            if (const int32_t named = pid_in_name(name); named == 0 || process_alive(named))
                continue;
        }
        if (::unlinkat(dfd, name, 0) == 0) removed.push_back({name, uint64_t(st.st_size), pid});
    }
    return removed;
}

void remove_stale_segments_now_and_then() noexcept {
    using Clock = std::chrono::steady_clock;
    static std::atomic<int64_t> last{INT64_MIN};
    const int64_t now =
        std::chrono::duration_cast<std::chrono::seconds>(Clock::now().time_since_epoch()).count();
    int64_t seen = last.load(std::memory_order_relaxed);
    if ((seen != INT64_MIN && now - seen < 60) ||
        !last.compare_exchange_strong(seen, now, std::memory_order_relaxed))
        return;
    try {
        const std::vector<StaleSegment> removed = remove_stale_segments();
        if (removed.empty()) return;
        uint64_t bytes = 0;
        std::string names;
        for (size_t i = 0; i < removed.size(); ++i) {
            bytes += removed[i].bytes;
            if (i < 3) names += (i ? ", " : "") + removed[i].name;
        }
        if (removed.size() > 3) names += " and " + std::to_string(removed.size() - 3) + " more";
        char mib[32];
        std::snprintf(mib, sizeof mib, "%.1f", double(bytes) / double(1 << 20));
        log().warn(
            "removed {} shared-memory segment(s) of {} MiB from /dev/shm, left by ccl processes "
            "that are gone (killed before their job had started?): {}",
            removed.size(), mib, names);
    } catch (...) {  // a scan that fails leaves things as they were
    }
}

}  // namespace ccl::shm

#include "shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/hex.h"

namespace ccl::shm {

namespace {

constexpr char kMagic[8] = {'c', 'c', 'l', '-', 's', 'h', 'm', '\0'};

// At offset 0 of every segment. Written once by the creator before the name is shared.
struct Header {
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;
    uint64_t size;  // bytes after the header
    uint8_t job[16];
    int32_t creator_pid;  // for messages only
};
static_assert(sizeof(Header) <= Segment::kHeaderBytes);

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
    // 0600 whatever the umask: the openers need read and write, nobody else anything.
    if (::fchmod(fd.fd, 0600) != 0) throw_errno("fchmod of " + name);
    size_t total = kHeaderBytes + size;
    if (::ftruncate(fd.fd, off_t(total)) != 0) throw_errno("ftruncate of " + name);
    if (int err = ::posix_fallocate(fd.fd, 0, off_t(total)); err != 0)
        throw_errno("reserving " + std::to_string(total) + " bytes of shared memory for " + name +
                        " (is /dev/shm full? see CCL_SHM_BUFFER_SIZE)",
                    err);
    seg.base_ = map(fd.fd, total, name);
    seg.data_ = static_cast<char*>(seg.base_) + kHeaderBytes;
    seg.size_ = size;
    Header h{};
    std::memcpy(h.magic, kMagic, sizeof(kMagic));
    h.version = kVersion;
    h.header_bytes = kHeaderBytes;
    h.size = size;
    std::memcpy(h.job, job.data(), job.size());
    h.creator_pid = int32_t(::getpid());
    std::memcpy(seg.base_, &h, sizeof(h));
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
    return seg;
}

Segment::Segment(Segment&& other) noexcept
    : name_(std::move(other.name_)),
      base_(std::exchange(other.base_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      owner_(std::exchange(other.owner_, false)),
      job_(other.job_) {}

Segment& Segment::operator=(Segment&& other) noexcept {
    if (this != &other) {
        release();
        name_ = std::move(other.name_);
        base_ = std::exchange(other.base_, nullptr);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        owner_ = std::exchange(other.owner_, false);
        job_ = other.job_;
    }
    return *this;
}

Segment::~Segment() { release(); }

void Segment::unlink() {
    if (owner_) {
        ::shm_unlink(name_.c_str());
        owner_ = false;
    }
}

void Segment::remove(const std::string& name) { ::shm_unlink(name.c_str()); }

void Segment::release() noexcept {
    if (base_) ::munmap(base_, kHeaderBytes + size_);
    base_ = nullptr;
    data_ = nullptr;
    if (owner_) ::shm_unlink(name_.c_str());
    owner_ = false;
}

}  // namespace ccl::shm

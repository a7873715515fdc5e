#include "shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "core/error.h"

namespace ccl::shm {

namespace {

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

Segment Segment::create(const std::string& name, size_t size) {
    Fd fd{::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600)};
    if (fd.fd < 0) throw_errno("shm_open(" + name + ", O_CREAT)");
    // From here on the name exists: unlink it again if anything below fails.
    Segment seg(name, nullptr, 0, true);
    if (::ftruncate(fd.fd, off_t(size)) != 0) throw_errno("ftruncate of " + name);
    if (int err = ::posix_fallocate(fd.fd, 0, off_t(size)); err != 0)
        throw_errno("reserving " + std::to_string(size) + " bytes of shared memory for " + name +
                        " (is /dev/shm full? see CCL_SHM_BUFFER_SIZE)",
                    err);
    seg.data_ = map(fd.fd, size, name);
    seg.size_ = size;
    return seg;
}

Segment Segment::open(const std::string& name, size_t size) {
    Fd fd{::shm_open(name.c_str(), O_RDWR, 0)};
    if (fd.fd < 0) throw_errno("shm_open(" + name + ")");
    struct stat st {};
    if (::fstat(fd.fd, &st) != 0) throw_errno("fstat of " + name);
    if (size_t(st.st_size) != size)
        throw Error(CCL_ERROR_INTERNAL, "shared-memory segment " + name + " has " +
                                            std::to_string(st.st_size) + " bytes, expected " +
                                            std::to_string(size));
    return Segment(name, map(fd.fd, size, name), size, false);
}

Segment::Segment(Segment&& other) noexcept
    : name_(std::move(other.name_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      owner_(std::exchange(other.owner_, false)) {}

Segment& Segment::operator=(Segment&& other) noexcept {
    if (this != &other) {
        release();
        name_ = std::move(other.name_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        owner_ = std::exchange(other.owner_, false);
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
    if (data_) ::munmap(data_, size_);
    data_ = nullptr;
    if (owner_) ::shm_unlink(name_.c_str());
    owner_ = false;
}

}  // namespace ccl::shm

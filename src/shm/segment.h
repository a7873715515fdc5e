// A POSIX shared-memory segment mapped into this process (RAII: unmapped on destruction; the
// creator also unlinks the name if nobody did yet, so a failed bootstrap leaves nothing behind).
#pragma once

#include <cstddef>
#include <string>

namespace ccl::shm {

class Segment {
public:
    // Creates `name` (which must not exist) with `size` bytes, reserving the memory up front so a
    // full /dev/shm is a clear error now, not a SIGBUS later.
    static Segment create(const std::string& name, size_t size);
    // Opens an existing segment, which must have `size` bytes.
    static Segment open(const std::string& name, size_t size);

    Segment() = default;
    Segment(Segment&& other) noexcept;
    Segment& operator=(Segment&& other) noexcept;
    Segment(const Segment&) = delete;
    Segment& operator=(const Segment&) = delete;
    ~Segment();

    void unlink();  // removes the name now (idempotent); the mapping stays valid
    // Leaves the name to another process to remove (see Mailbox).
    void disown() { owner_ = false; }
    // Removes a name this process did not create (its creator's Segment then finds it gone).
    static void remove(const std::string& name);
    void* data() const { return data_; }
    size_t size() const { return size_; }
    const std::string& name() const { return name_; }

private:
    Segment(std::string name, void* data, size_t size, bool owner)
        : name_(std::move(name)), data_(data), size_(size), owner_(owner) {}
    void release() noexcept;

    std::string name_;
    void* data_ = nullptr;
    size_t size_ = 0;
    bool owner_ = false;  // created it and has not unlinked it yet
};

}  // namespace ccl::shm

// A POSIX shared-memory segment mapped into this process (RAII: unmapped on destruction; the
// creator also unlinks the name if nobody did yet, so a failed bootstrap leaves nothing behind).
//
// Segments are created 0600 (only this user's processes can open them) and begin with a header
// page: magic, layout version, size and the id of the job (communicator) that made it. open()
// refuses, naming the segment, one whose owner, permissions or header disagree with what the
// opener was told through the job's bootstrap: a stale, foreign or truncated segment is never
// used as ours. data() and size() are what follows the header.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ccl::shm {

// Random per communicator (rank 0 draws it and shares it with the segment names).
using JobId = std::array<uint8_t, 16>;

class Segment {
public:
    static constexpr uint32_t kVersion = 1;       // of the header and of what follows it
    static constexpr size_t kHeaderBytes = 4096;  // one page: data() stays page-aligned

    // Creates `name` (which must not exist) with `size` bytes after the header, reserving the
    // memory up front so a full /dev/shm is a clear error now, not a SIGBUS later.
    static Segment create(const std::string& name, size_t size, const JobId& job);
    // Opens an existing segment, which must be this user's, 0600, and carry a header saying
    // `size` bytes of job `job` at this version: else CCL_ERROR_INVALID_USAGE naming it.
    static Segment open(const std::string& name, size_t size, const JobId& job);

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
    const JobId& job() const { return job_; }

private:
    Segment(std::string name, void* base, size_t size, bool owner, const JobId& job);
    void release() noexcept;

    std::string name_;
    void* base_ = nullptr;  // the mapping, header included
    void* data_ = nullptr;  // after the header
    size_t size_ = 0;       // after the header
    bool owner_ = false;    // created it and has not unlinked it yet
    JobId job_{};
};

}  // namespace ccl::shm

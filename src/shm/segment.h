// A POSIX shared-memory segment mapped into this process (RAII: unmapped on destruction; the
// creator also unlinks the name if nobody did yet, so a failed bootstrap leaves nothing behind).
//
// Segments are created 0600 (only this user's processes can open them) and begin with a header
// page: magic, layout version, size, the id of the job (communicator) that made it and the
// identity of the process that made it. open() refuses, naming the segment, one whose owner,
// permissions or header disagree with what the opener was told through the job's bootstrap: a
// stale, foreign or truncated segment is never used as ours. data() and size() are what follows
// the header.
//
// Names go as soon as every process that opens them has: the creator's, or the opener's when the
// creator is gone (a job whose rank 0 died while the others were mapping). A creator killed before
// then leaves its names in /dev/shm, which nobody would remove: remove_stale_segments() finds the
// segments whose creator is gone and removes them (ccl_comm_create runs it now and then, and
// `ccl_info --clean` on demand).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/wait.h"

namespace ccl::shm {

// Random per communicator (rank 0 draws it and shares it with the segment names).
using JobId = std::array<uint8_t, 16>;

// This process's pid namespace (the inode of /proc/self/ns/pid; 0 where unknown): pids and start
// times compare only within one.
uint64_t pid_namespace();

class Segment {
public:
    static constexpr uint32_t kVersion = 2;       // of the header and of what follows it
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

    // Removes the name now (idempotent), whoever created it; the mapping stays valid.
    void unlink();
    // Leaves the name to another process to remove (see Mailbox).
    // Lets go of the name without removing it, for `heir` to open and remove: the segment counts
    // as in use (remove_stale_segments) while either runs.
    void disown(const ProcessId& heir);
    // Removes a name this process did not create (its creator's Segment then finds it gone).
    static void remove(const std::string& name);
    void* data() const { return data_; }
    size_t size() const { return size_; }
    const std::string& name() const { return name_; }
    const JobId& job() const { return job_; }
    const ProcessId& creator() const { return creator_; }

private:
    Segment(std::string name, void* base, size_t size, bool owner, const JobId& job);
    void release() noexcept;

    std::string name_;
    void* base_ = nullptr;  // the mapping, header included
    void* data_ = nullptr;  // after the header
    size_t size_ = 0;       // after the header
    bool owner_ = false;    // created it and has not unlinked it yet
    bool opened_ = false;   // opened it and has not unlinked it yet
    JobId job_{};
    ProcessId creator_;
};

// A segment remove_stale_segments() removed.
struct StaleSegment {
    std::string name;     // in /dev/shm
    uint64_t bytes = 0;   // the file's size
    int32_t creator = 0;  // its creator's pid (0: it has no header)
};

// Younger segments are left alone: a name is a few seconds old at most while its job starts.
inline constexpr std::chrono::seconds kStaleAge{5};

// Removes the segments in /dev/shm whose names start with `prefix` (ccl's: "ccl-"), that this
// user owns, were last modified at least `min_age` ago and whose creator is gone: the process
// their header names is not running (or a later one has its pid); one without a header (its
// creator died while making it) by the pid its name starts with ("ccl-<pid>-"). A segment made in
// another pid namespace is never removed (its creator cannot be seen from here). Returns what it
// removed.
std::vector<StaleSegment> remove_stale_segments(std::chrono::seconds min_age = kStaleAge,
                                                const std::string& prefix = "ccl-");
// The same at most once a minute per process, logging what it removed (a warning): run where a
// communicator makes its segments, so that the next job cleans up after one that was killed.
void remove_stale_segments_now_and_then() noexcept;

}  // namespace ccl::shm

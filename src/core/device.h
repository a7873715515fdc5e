// Device (XPU) memory through Level Zero, loaded at run time: libccl runs where Level Zero is
// absent. Classifies buffers (plain host memory, or Level Zero host / shared / device memory) and
// copies between device and host memory with copy command lists. docs/xpu.md.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ccl::ze {

enum class MemKind { plain, host, shared, device };
const char* mem_kind_name(MemKind kind);

// What Level Zero says about a pointer.
struct MemInfo {
    MemKind kind = MemKind::plain;
    void* device = nullptr;  // ze_device_handle_t of device and shared memory
    uint64_t id = 0;         // the allocation's unique id
    // Host code cannot touch this memory: it must be staged or copied by a command list.
    bool needs_copy() const { return kind == MemKind::device; }
};

// 0: not decided yet, 1: off, 2: on, 3: off, but the process holds a Level Zero loader that ccl
// did not use (device pointers may come in: each call checks its buffers are readable).
inline std::atomic<int> g_state{0};
int init_state();

// Whether calls must look at their buffers: the only cost on the host-only path, one predictable
// branch once decided.
inline bool active() {
    int s = g_state.load(std::memory_order_relaxed);
    if (s == 1) [[likely]]
        return false;
    if (s == 0) s = init_state();
    return s != 1;
}
inline bool enabled() { return active() && g_state.load(std::memory_order_relaxed) == 2; }

// Why XPU support is off ("" when on).
std::string off_reason();

// Asks the driver(s) about p. Plain host memory when XPU is off.
MemInfo classify(const void* p);

// With XPU off but a loader in the process: throws CCL_ERROR_INVALID_ARGUMENT naming `name` when
// the first or last byte of [p, p + bytes) cannot be read (device memory ccl cannot stage).
void check_readable(const void* p, size_t bytes, const char* name);

struct CopyOp {
    void* dst;
    const void* src;
    size_t bytes;
};

// Where copies run: ccl's own immediate copy list on a device, or a user's stream.
class Copier {
public:
    virtual ~Copier() = default;
    // Appends the copies in order and waits (until `deadline`) for them and everything submitted
    // before them to complete. Throws CCL_ERROR_TIMEOUT past the deadline, CCL_ERROR_SYSTEM when
    // Level Zero fails.
    virtual void copy(const std::vector<CopyOp>& ops,
                      std::chrono::steady_clock::time_point deadline) = 0;
    // Whether append() works (ccl's own copiers; streams copy synchronously only).
    virtual bool can_append() const { return false; }
    // Appends the copies without waiting; `signal` (from CopyEvents of the copier's device) is
    // signalled once they are done.
    virtual void append(const std::vector<CopyOp>& ops, void* signal);
};

// Events for copies in flight (pipelined staging): host-visible, on a device's context in ccl.
class CopyEvents {
public:
    CopyEvents(void* device, size_t n);
    ~CopyEvents();
    CopyEvents(const CopyEvents&) = delete;
    CopyEvents& operator=(const CopyEvents&) = delete;
    void* get(size_t i) const;
    // Waits for event i until the deadline (CCL_ERROR_TIMEOUT past it).
    void wait(size_t i, std::chrono::steady_clock::time_point deadline) const;

private:
    void release();
    void* pool_ = nullptr;
    std::vector<void*> events_;
};

// ccl's copier for a device (in ccl's own context), shared by every call on it.
Copier& copier_for(void* device);

// Host memory for staging (Level Zero host memory: the copy engines read it fastest), from a
// pool; returned to the pool when destroyed.
class HostBuffer {
public:
    explicit HostBuffer(size_t bytes);
    ~HostBuffer();
    HostBuffer(const HostBuffer&) = delete;
    HostBuffer& operator=(const HostBuffer&) = delete;
    char* data() const { return data_; }
    size_t size() const { return size_; }

private:
    char* data_ = nullptr;
    size_t size_ = 0;
};

// A user's stream: a Level Zero immediate command list or command queue, with its context and
// device. Collectives given one order their copies with the user's work on it.
class Stream final : public Copier {
public:
    enum class Kind { command_list, command_queue };
    Stream(Kind kind, void* context, void* device, void* handle);
    ~Stream() override;
    void copy(const std::vector<CopyOp>& ops,
              std::chrono::steady_clock::time_point deadline) override;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Throws CCL_ERROR_UNSUPPORTED with why when XPU support is off.
void require_enabled(const char* what);

// IPC: what a peer needs to open this process's device buffer p (the handle of its allocation,
// the allocation's identity and the buffer's offset in it). Handles of this process's
// allocations are asked for once per allocation id.
struct IpcRecord {
    char handle[64] = {};  // ze_ipc_mem_handle_t
    uint64_t owner = 0;    // the owner's pid
    uint64_t id = 0;       // the allocation's id (never reused)
    uint64_t base = 0;     // the allocation's base address in its owner's process
    uint64_t size = 0;     // the allocation's size
    uint64_t offset = 0;   // of the buffer in the allocation
};
IpcRecord ipc_record(const void* p, const MemInfo& info);

// A peer's buffer mapped in this process, from the process-wide cache of opened handles. An entry
// is reused only for the same owner, allocation id, base and size: memory the peer freed or
// reallocated has a new id, so the stale mapping is closed, never used, and the new handle opened.
// `device`: the device this process copies on.
void* ipc_open(const IpcRecord& rec, void* device);
size_t ipc_opens();  // handles opened so far in this process (tests, logs)

}  // namespace ccl::ze

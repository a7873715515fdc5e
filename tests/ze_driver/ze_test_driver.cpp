// A Level Zero driver backed by host memory, for testing ccl's XPU path without a GPU. The real
// loader loads it through ZE_ENABLE_ALT_DRIVERS. It has one driver and one device, contexts, host /
// shared / device allocations, copies, immediate and regular command lists, queues, events,
// fences and IPC handles between processes.
//
// Device memory is not readable by plain host code: each device allocation is a named shared
// memory object mapped twice, PROT_NONE at the address the user gets and read/write at a private
// address that only this driver's copies use. A missed staging step in ccl faults. IPC handles
// carry the object's name and the allocation id, so another process maps the same memory; a
// freed allocation's name is gone, so a stale handle cannot be opened.
//
// Work runs in order on an engine thread per queue and per asynchronous immediate list (a
// synchronous immediate list runs it before the append returns), so users must wait for events,
// fences or queues as on a GPU: a missed wait reads stale data.
#include <fcntl.h>
#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>
#include <level_zero/zes_ddi.h>
#include <level_zero/zet_ddi.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Driver {
    int tag = 1;
} g_driver;
struct Device {
    int tag = 2;
} g_device;

struct Context {
    int tag = 3;
};

struct Event {
    std::atomic<bool> signaled{false};
};
struct EventPool {
    std::vector<std::unique_ptr<Event>> events;
};
struct Fence {
    std::atomic<bool> signaled{false};
};

using Op = std::function<void()>;

// Runs submitted work in order on its own thread, like a GPU engine.
class Engine {
public:
    Engine() : thread_([this] { run(); }) {}
    ~Engine() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        thread_.join();  // after the queued work: destroying a busy list waits for it
    }
    void push(Op op) {
        {
            std::lock_guard<std::mutex> lock(mu_);
            ops_.push_back(std::move(op));
        }
        cv_.notify_all();
    }

private:
    void run() {
        for (;;) {
            Op op;
            {
                std::unique_lock<std::mutex> lock(mu_);
                cv_.wait(lock, [this] { return stop_ || !ops_.empty(); });
                if (ops_.empty()) return;
                op = std::move(ops_.front());
                ops_.pop_front();
            }
            op();
        }
    }
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Op> ops_;
    bool stop_ = false;
    std::thread thread_;  // last: starts once the rest is built
};

struct CommandList {
    bool immediate = false;
    std::unique_ptr<Engine> engine;  // asynchronous immediate lists
    std::vector<Op> ops;             // regular lists: recorded until executed
};
struct Queue {
    Engine engine;
};

enum class Kind { host, shared, device, imported };

struct Alloc {
    Kind kind;
    char* user = nullptr;  // what the user sees
    char* priv = nullptr;  // device memory: the driver's read/write view
    size_t size = 0;
    uint64_t id = 0;
    std::string name;  // device memory: the shared-memory object
};

std::mutex g_mu;
std::map<uintptr_t, Alloc> g_allocs;  // by user base address
std::atomic<uint64_t> g_next_id{1};
// The last freed device range per size, kept reserved (inaccessible): a new allocation of that
// size reuses its address, so tests can free and reallocate "at the same address" like a caching
// allocator does, whatever the process maps meanwhile (AddressSanitizer's allocator took a freed
// range now and then while it was unmapped).
std::map<size_t, void*> g_freed;

// Handles handed to the loader are raw pointers by ABI; these registries own the objects.
template <class T>
class Registry {
public:
    T* add(std::unique_ptr<T> obj) {
        std::lock_guard<std::mutex> lock(mu_);
        T* p = obj.get();
        live_.emplace(p, std::move(obj));
        return p;
    }
    void remove(void* p) {
        std::lock_guard<std::mutex> lock(mu_);
        live_.erase(static_cast<T*>(p));
    }

private:
    std::mutex mu_;
    std::map<T*, std::unique_ptr<T>> live_;
};
Registry<Context> g_contexts;
Registry<CommandList> g_lists;
Registry<Queue> g_queues;
Registry<EventPool> g_pools;
Registry<Fence> g_fences;

uint64_t new_id() { return (uint64_t(::getpid()) << 32) | g_next_id++; }

// The allocation holding p, or nullptr (g_mu held).
Alloc* find_locked(const void* p) {
    auto a = reinterpret_cast<uintptr_t>(p);
    auto it = g_allocs.upper_bound(a);
    if (it == g_allocs.begin()) return nullptr;
    --it;
    if (a >= it->first + it->second.size) return nullptr;
    return &it->second;
}

// Where the driver reads or writes user address p: device memory through its private view.
char* resolve(const void* p) {
    std::lock_guard<std::mutex> lock(g_mu);
    Alloc* a = find_locked(p);
    if (!a || !a->priv) return static_cast<char*>(const_cast<void*>(p));
    return a->priv + (static_cast<const char*>(p) - a->user);
}

void wait_event(Event* e) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!e->signaled.load(std::memory_order_acquire)) {
        if (std::chrono::steady_clock::now() > deadline) {
            std::fprintf(stderr, "ze_test_driver: a wait event was never signaled (60 s)\n");
            std::abort();
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
}

void submit(CommandList* cl, Op op) {
    if (cl->engine)
        cl->engine->push(std::move(op));
    else if (cl->immediate)
        op();
    else
        cl->ops.push_back(std::move(op));
}

// Waits, then signals: the common tail of every append.
Op with_events(Op body, ze_event_handle_t signal, uint32_t nwait, ze_event_handle_t* waits) {
    std::vector<Event*> w;
    for (uint32_t i = 0; i < nwait; ++i) w.push_back(reinterpret_cast<Event*>(waits[i]));
    auto* s = reinterpret_cast<Event*>(signal);
    return [body = std::move(body), s, w] {
        for (Event* e : w) wait_event(e);
        if (body) body();
        if (s) s->signaled.store(true, std::memory_order_release);
    };
}

bool device_visible() {
    // ZE_AFFINITY_MASK lists the visible devices ("0", "0.1", "1,0"); our only device is 0.
    const char* mask = std::getenv("ZE_AFFINITY_MASK");
    if (!mask || !*mask) return true;
    std::string m = mask;
    size_t pos = 0;
    while (pos <= m.size()) {
        size_t comma = m.find(',', pos);
        std::string item =
            m.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (item == "0" || item.rfind("0.", 0) == 0) return true;
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return false;
}

// ---- global, driver, device ----

ze_result_t zeInit_(ze_init_flags_t) { return ZE_RESULT_SUCCESS; }

ze_result_t DriverGet(uint32_t* count, ze_driver_handle_t* drivers) {
    if (!count) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (*count == 0 || !drivers) {
        *count = 1;
        return ZE_RESULT_SUCCESS;
    }
    drivers[0] = reinterpret_cast<ze_driver_handle_t>(&g_driver);
    *count = 1;
    return ZE_RESULT_SUCCESS;
}

ze_result_t DriverGetApiVersion(ze_driver_handle_t, ze_api_version_t* v) {
    *v = ZE_API_VERSION_1_4;
    return ZE_RESULT_SUCCESS;
}

ze_result_t DriverGetProperties(ze_driver_handle_t, ze_driver_properties_t* p) {
    std::memset(&p->uuid, 0, sizeof(p->uuid));
    std::memcpy(p->uuid.id, "ccl-ze-test", 11);
    p->driverVersion = 1;
    return ZE_RESULT_SUCCESS;
}

ze_result_t DriverGetIpcProperties(ze_driver_handle_t, ze_driver_ipc_properties_t* p) {
    p->flags = ZE_IPC_PROPERTY_FLAG_MEMORY;
    return ZE_RESULT_SUCCESS;
}

ze_result_t DriverGetExtensionProperties(ze_driver_handle_t, uint32_t* count,
                                         ze_driver_extension_properties_t*) {
    *count = 0;
    return ZE_RESULT_SUCCESS;
}

ze_result_t DeviceGet(ze_driver_handle_t, uint32_t* count, ze_device_handle_t* devices) {
    if (!count) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    uint32_t n = device_visible() ? 1 : 0;
    if (*count == 0 || !devices) {
        *count = n;
        return ZE_RESULT_SUCCESS;
    }
    if (n) devices[0] = reinterpret_cast<ze_device_handle_t>(&g_device);
    *count = n;
    return ZE_RESULT_SUCCESS;
}

ze_result_t DeviceGetSubDevices(ze_device_handle_t, uint32_t* count, ze_device_handle_t*) {
    *count = 0;
    return ZE_RESULT_SUCCESS;
}

ze_result_t DeviceGetProperties(ze_device_handle_t, ze_device_properties_t* p) {
    void* next = p->pNext;
    ze_structure_type_t type = p->stype;
    std::memset(p, 0, sizeof(*p));
    p->stype = type;
    p->pNext = next;
    p->type = ZE_DEVICE_TYPE_GPU;
    p->vendorId = 0x8086;
    p->maxMemAllocSize = 1ull << 34;
    std::snprintf(p->name, sizeof(p->name), "ccl Level Zero test device (host memory)");
    return ZE_RESULT_SUCCESS;
}

ze_result_t DeviceGetCommandQueueGroupProperties(ze_device_handle_t, uint32_t* count,
                                                 ze_command_queue_group_properties_t* p) {
    if (*count == 0 || !p) {
        *count = 2;
        return ZE_RESULT_SUCCESS;
    }
    // Group 0 computes and copies, group 1 only copies (like a GPU's copy engines).
    const ze_command_queue_group_property_flags_t flags[2] = {
        ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE | ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY,
        ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY};
    uint32_t n = *count < 2 ? *count : 2;
    for (uint32_t i = 0; i < n; ++i) {
        p[i].flags = flags[i];
        p[i].maxMemoryFillPatternSize = 4;
        p[i].numQueues = 1;
    }
    *count = n;
    return ZE_RESULT_SUCCESS;
}

// ---- contexts ----

ze_result_t ContextCreate(ze_driver_handle_t, const ze_context_desc_t*, ze_context_handle_t* out) {
    *out = reinterpret_cast<ze_context_handle_t>(g_contexts.add(std::make_unique<Context>()));
    return ZE_RESULT_SUCCESS;
}

ze_result_t ContextDestroy(ze_context_handle_t c) {
    g_contexts.remove(c);
    return ZE_RESULT_SUCCESS;
}

ze_result_t ContextGetStatus(ze_context_handle_t) { return ZE_RESULT_SUCCESS; }

// ---- memory ----

ze_result_t alloc_plain(Kind kind, size_t size, void** out) {
    if (size == 0) return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    std::lock_guard<std::mutex> lock(g_mu);
    g_allocs[reinterpret_cast<uintptr_t>(p)] =
        Alloc{kind, static_cast<char*>(p), nullptr, size, new_id(), {}};
    *out = p;
    return ZE_RESULT_SUCCESS;
}

// Maps shared-memory object `fd` twice: PROT_NONE for the user (over the reserved range `hint`
// if any), read/write for the driver.
bool map_twice(int fd, size_t size, void* hint, char** user, char** priv) {
    void* u = ::mmap(hint, size, PROT_NONE, MAP_SHARED | (hint ? MAP_FIXED : 0), fd, 0);
    if (u == MAP_FAILED) return false;
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        ::munmap(u, size);
        return false;
    }
    *user = static_cast<char*>(u);
    *priv = static_cast<char*>(p);
    return true;
}

ze_result_t MemAllocDevice(ze_context_handle_t, const ze_device_mem_alloc_desc_t*, size_t size,
                           size_t, ze_device_handle_t, void** out) {
    if (size == 0) return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    uint64_t id = new_id();
    std::string name =
        "/ccl-zetest-" + std::to_string(::getpid()) + "-" + std::to_string(id & 0xffffffffu);
    int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
    void* hint = nullptr;
    {
        std::lock_guard<std::mutex> lock(g_mu);
        if (auto it = g_freed.find(size); it != g_freed.end()) {
            hint = it->second;
            g_freed.erase(it);
        }
    }
    char *user = nullptr, *priv = nullptr;
    bool ok = ::ftruncate(fd, off_t(size)) == 0 && map_twice(fd, size, hint, &user, &priv);
    ::close(fd);
    if (!ok) {
        ::shm_unlink(name.c_str());
        return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
    }
    std::lock_guard<std::mutex> lock(g_mu);
    g_allocs[reinterpret_cast<uintptr_t>(user)] = Alloc{Kind::device, user, priv, size, id, name};
    *out = user;
    return ZE_RESULT_SUCCESS;
}

ze_result_t MemAllocHost(ze_context_handle_t, const ze_host_mem_alloc_desc_t*, size_t size, size_t,
                         void** out) {
    return alloc_plain(Kind::host, size, out);
}

ze_result_t MemAllocShared(ze_context_handle_t, const ze_device_mem_alloc_desc_t*,
                           const ze_host_mem_alloc_desc_t*, size_t size, size_t, ze_device_handle_t,
                           void** out) {
    return alloc_plain(Kind::shared, size, out);
}

ze_result_t MemFree(ze_context_handle_t, void* p) {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_allocs.find(reinterpret_cast<uintptr_t>(p));
    if (it == g_allocs.end() || it->second.kind == Kind::imported)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    Alloc& a = it->second;
    if (a.priv) {
        ::munmap(a.priv, a.size);
        ::shm_unlink(a.name.c_str());
        // The user's range becomes a reservation that nothing else can take (see g_freed).
        void* r = ::mmap(a.user, a.size, PROT_NONE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
        if (r == MAP_FAILED) {
            ::munmap(a.user, a.size);
        } else {
            if (auto old = g_freed.find(a.size); old != g_freed.end())
                ::munmap(old->second, a.size);
            g_freed[a.size] = a.user;
        }
    } else {
        ::munmap(a.user, a.size);
    }
    g_allocs.erase(it);
    return ZE_RESULT_SUCCESS;
}

ze_result_t MemGetAllocProperties(ze_context_handle_t, const void* p,
                                  ze_memory_allocation_properties_t* props,
                                  ze_device_handle_t* device) {
    std::lock_guard<std::mutex> lock(g_mu);
    Alloc* a = find_locked(p);
    props->type = ZE_MEMORY_TYPE_UNKNOWN;
    props->id = 0;
    props->pageSize = 4096;
    if (device) *device = nullptr;
    if (!a) return ZE_RESULT_SUCCESS;
    switch (a->kind) {
        case Kind::host: props->type = ZE_MEMORY_TYPE_HOST; break;
        case Kind::shared: props->type = ZE_MEMORY_TYPE_SHARED; break;
        case Kind::device:
        case Kind::imported: props->type = ZE_MEMORY_TYPE_DEVICE; break;
    }
    props->id = a->id;
    if (device && a->kind != Kind::host) *device = reinterpret_cast<ze_device_handle_t>(&g_device);
    return ZE_RESULT_SUCCESS;
}

ze_result_t MemGetAddressRange(ze_context_handle_t, const void* p, void** base, size_t* size) {
    std::lock_guard<std::mutex> lock(g_mu);
    Alloc* a = find_locked(p);
    if (!a) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (base) *base = a->user;
    if (size) *size = a->size;
    return ZE_RESULT_SUCCESS;
}

// What an IPC handle carries: the object's name (another process opens it), size and id.
struct IpcData {
    uint64_t id;
    uint64_t size;
    char name[ZE_MAX_IPC_HANDLE_SIZE - 16];
};
static_assert(sizeof(IpcData) == ZE_MAX_IPC_HANDLE_SIZE);

ze_result_t MemGetIpcHandle(ze_context_handle_t, const void* p, ze_ipc_mem_handle_t* h) {
    std::lock_guard<std::mutex> lock(g_mu);
    Alloc* a = find_locked(p);
    if (!a || a->kind != Kind::device || p != a->user) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    IpcData d{};
    d.id = a->id;
    d.size = a->size;
    std::snprintf(d.name, sizeof(d.name), "%s", a->name.c_str());
    std::memcpy(h->data, &d, sizeof(d));
    return ZE_RESULT_SUCCESS;
}

ze_result_t MemOpenIpcHandle(ze_context_handle_t, ze_device_handle_t, ze_ipc_mem_handle_t h,
                             ze_ipc_memory_flags_t, void** out) {
    IpcData d;
    std::memcpy(&d, h.data, sizeof(d));
    d.name[sizeof(d.name) - 1] = '\0';
    int fd = ::shm_open(d.name, O_RDWR, 0);
    if (fd < 0) return ZE_RESULT_ERROR_INVALID_ARGUMENT;  // freed by its owner
    char *user = nullptr, *priv = nullptr;
    bool ok = map_twice(fd, d.size, nullptr, &user, &priv);
    ::close(fd);
    if (!ok) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    std::lock_guard<std::mutex> lock(g_mu);
    g_allocs[reinterpret_cast<uintptr_t>(user)] =
        Alloc{Kind::imported, user, priv, d.size, d.id, d.name};
    *out = user;
    return ZE_RESULT_SUCCESS;
}

ze_result_t MemCloseIpcHandle(ze_context_handle_t, const void* p) {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_allocs.find(reinterpret_cast<uintptr_t>(p));
    if (it == g_allocs.end() || it->second.kind != Kind::imported)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    ::munmap(it->second.user, it->second.size);
    ::munmap(it->second.priv, it->second.size);
    g_allocs.erase(it);
    return ZE_RESULT_SUCCESS;
}

// ---- command lists and queues ----

// Polls until `done` or `timeout_ns` passes (UINT64_MAX: no limit, as the spec says).
template <class F>
ze_result_t host_wait(F done, uint64_t timeout_ns) {
    auto start = std::chrono::steady_clock::now();
    while (!done()) {
        if (timeout_ns != UINT64_MAX &&
            std::chrono::steady_clock::now() - start >= std::chrono::nanoseconds(timeout_ns))
            return ZE_RESULT_NOT_READY;
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return ZE_RESULT_SUCCESS;
}

ze_result_t ListCreate(ze_context_handle_t, ze_device_handle_t, const ze_command_list_desc_t*,
                       ze_command_list_handle_t* out) {
    *out = reinterpret_cast<ze_command_list_handle_t>(g_lists.add(std::make_unique<CommandList>()));
    return ZE_RESULT_SUCCESS;
}

ze_result_t ListCreateImmediate(ze_context_handle_t, ze_device_handle_t,
                                const ze_command_queue_desc_t* desc,
                                ze_command_list_handle_t* out) {
    auto cl = std::make_unique<CommandList>();
    cl->immediate = true;
    if (desc->mode != ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS) cl->engine = std::make_unique<Engine>();
    *out = reinterpret_cast<ze_command_list_handle_t>(g_lists.add(std::move(cl)));
    return ZE_RESULT_SUCCESS;
}

ze_result_t ListDestroy(ze_command_list_handle_t cl) {
    g_lists.remove(cl);
    return ZE_RESULT_SUCCESS;
}

ze_result_t ListClose(ze_command_list_handle_t) { return ZE_RESULT_SUCCESS; }

ze_result_t ListReset(ze_command_list_handle_t cl) {
    reinterpret_cast<CommandList*>(cl)->ops.clear();
    return ZE_RESULT_SUCCESS;
}

ze_result_t ListAppendBarrier(ze_command_list_handle_t cl, ze_event_handle_t signal, uint32_t n,
                              ze_event_handle_t* waits) {
    submit(reinterpret_cast<CommandList*>(cl), with_events({}, signal, n, waits));
    return ZE_RESULT_SUCCESS;
}

ze_result_t ListAppendMemoryCopy(ze_command_list_handle_t cl, void* dst, const void* src,
                                 size_t size, ze_event_handle_t signal, uint32_t n,
                                 ze_event_handle_t* waits) {
    // Addresses are resolved when the copy runs: the memory must be live then, as on a GPU.
    Op copy = [dst, src, size] {
        if (size) std::memmove(resolve(dst), resolve(src), size);
    };
    submit(reinterpret_cast<CommandList*>(cl), with_events(std::move(copy), signal, n, waits));
    return ZE_RESULT_SUCCESS;
}

ze_result_t ListAppendMemoryFill(ze_command_list_handle_t cl, void* dst, const void* pattern,
                                 size_t psize, size_t size, ze_event_handle_t signal, uint32_t n,
                                 ze_event_handle_t* waits) {
    std::vector<char> pat(static_cast<const char*>(pattern),
                          static_cast<const char*>(pattern) + psize);
    Op fill = [dst, pat, size] {
        char* d = resolve(dst);
        for (size_t i = 0; i < size; ++i) d[i] = pat[i % pat.size()];
    };
    submit(reinterpret_cast<CommandList*>(cl), with_events(std::move(fill), signal, n, waits));
    return ZE_RESULT_SUCCESS;
}

ze_result_t ListAppendSignalEvent(ze_command_list_handle_t cl, ze_event_handle_t e) {
    submit(reinterpret_cast<CommandList*>(cl), with_events({}, e, 0, nullptr));
    return ZE_RESULT_SUCCESS;
}

ze_result_t ListAppendWaitOnEvents(ze_command_list_handle_t cl, uint32_t n,
                                   ze_event_handle_t* waits) {
    submit(reinterpret_cast<CommandList*>(cl), with_events({}, nullptr, n, waits));
    return ZE_RESULT_SUCCESS;
}

ze_result_t ListAppendEventReset(ze_command_list_handle_t cl, ze_event_handle_t e) {
    auto* ev = reinterpret_cast<Event*>(e);
    submit(reinterpret_cast<CommandList*>(cl), [ev] { ev->signaled.store(false); });
    return ZE_RESULT_SUCCESS;
}

ze_result_t QueueCreate(ze_context_handle_t, ze_device_handle_t, const ze_command_queue_desc_t*,
                        ze_command_queue_handle_t* out) {
    *out = reinterpret_cast<ze_command_queue_handle_t>(g_queues.add(std::make_unique<Queue>()));
    return ZE_RESULT_SUCCESS;
}

ze_result_t QueueDestroy(ze_command_queue_handle_t q) {
    g_queues.remove(q);
    return ZE_RESULT_SUCCESS;
}

ze_result_t QueueExecute(ze_command_queue_handle_t q, uint32_t n, ze_command_list_handle_t* lists,
                         ze_fence_handle_t fence) {
    // The lists' work as it is now: the user may reset them once it has run.
    std::vector<Op> ops;
    for (uint32_t i = 0; i < n; ++i)
        for (const Op& op : reinterpret_cast<CommandList*>(lists[i])->ops) ops.push_back(op);
    auto* f = reinterpret_cast<Fence*>(fence);
    reinterpret_cast<Queue*>(q)->engine.push([ops = std::move(ops), f] {
        for (const Op& op : ops) op();
        if (f) f->signaled.store(true, std::memory_order_release);
    });
    return ZE_RESULT_SUCCESS;
}

ze_result_t QueueSynchronize(ze_command_queue_handle_t q, uint64_t timeout) {
    auto done = std::make_shared<std::atomic<bool>>(false);
    reinterpret_cast<Queue*>(q)->engine.push([done] { done->store(true); });
    return host_wait([done] { return done->load(); }, timeout);
}

// ---- events and fences ----

ze_result_t PoolCreate(ze_context_handle_t, const ze_event_pool_desc_t* desc, uint32_t,
                       ze_device_handle_t*, ze_event_pool_handle_t* out) {
    auto pool = std::make_unique<EventPool>();
    for (uint32_t i = 0; i < desc->count; ++i) pool->events.push_back(std::make_unique<Event>());
    *out = reinterpret_cast<ze_event_pool_handle_t>(g_pools.add(std::move(pool)));
    return ZE_RESULT_SUCCESS;
}

ze_result_t PoolDestroy(ze_event_pool_handle_t p) {
    g_pools.remove(p);
    return ZE_RESULT_SUCCESS;
}

ze_result_t EventCreate(ze_event_pool_handle_t p, const ze_event_desc_t* desc,
                        ze_event_handle_t* out) {
    auto* pool = reinterpret_cast<EventPool*>(p);
    if (desc->index >= pool->events.size()) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    Event* e = pool->events[desc->index].get();
    e->signaled.store(false);
    *out = reinterpret_cast<ze_event_handle_t>(e);
    return ZE_RESULT_SUCCESS;
}

ze_result_t EventDestroy(ze_event_handle_t) { return ZE_RESULT_SUCCESS; }

ze_result_t EventHostSignal(ze_event_handle_t e) {
    reinterpret_cast<Event*>(e)->signaled.store(true, std::memory_order_release);
    return ZE_RESULT_SUCCESS;
}

ze_result_t EventHostSynchronize(ze_event_handle_t e, uint64_t timeout) {
    auto* ev = reinterpret_cast<Event*>(e);
    return host_wait([ev] { return ev->signaled.load(std::memory_order_acquire); }, timeout);
}

ze_result_t EventQueryStatus(ze_event_handle_t e) {
    return reinterpret_cast<Event*>(e)->signaled.load(std::memory_order_acquire)
               ? ZE_RESULT_SUCCESS
               : ZE_RESULT_NOT_READY;
}

ze_result_t EventHostReset(ze_event_handle_t e) {
    reinterpret_cast<Event*>(e)->signaled.store(false);
    return ZE_RESULT_SUCCESS;
}

ze_result_t FenceCreate(ze_command_queue_handle_t, const ze_fence_desc_t*, ze_fence_handle_t* out) {
    *out = reinterpret_cast<ze_fence_handle_t>(g_fences.add(std::make_unique<Fence>()));
    return ZE_RESULT_SUCCESS;
}

ze_result_t FenceDestroy(ze_fence_handle_t f) {
    g_fences.remove(f);
    return ZE_RESULT_SUCCESS;
}

ze_result_t FenceHostSynchronize(ze_fence_handle_t f, uint64_t timeout) {
    auto* fe = reinterpret_cast<Fence*>(f);
    return host_wait([fe] { return fe->signaled.load(std::memory_order_acquire); }, timeout);
}

ze_result_t FenceQueryStatus(ze_fence_handle_t f) {
    return reinterpret_cast<Fence*>(f)->signaled.load() ? ZE_RESULT_SUCCESS : ZE_RESULT_NOT_READY;
}

ze_result_t FenceReset(ze_fence_handle_t f) {
    reinterpret_cast<Fence*>(f)->signaled.store(false);
    return ZE_RESULT_SUCCESS;
}

template <class T>
ze_result_t table(ze_api_version_t version, T* t) {
    if (!t) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (ZE_MAJOR_VERSION(version) != 1) return ZE_RESULT_ERROR_UNSUPPORTED_VERSION;
    std::memset(t, 0, sizeof(*t));  // what the driver does not implement stays null
    return ZE_RESULT_SUCCESS;
}

}  // namespace

// The DDI tables the 1.8 loader requires of every driver (its zeInit fails without any one of the
// core, tools and sysman tables; the experimental ones are optional and left out). Tables of
// features this driver lacks are returned empty.
extern "C" {

ZE_DLLEXPORT ze_result_t ZE_APICALL zeGetGlobalProcAddrTable(ze_api_version_t v,
                                                             ze_global_dditable_t* t) {
    ze_result_t r = table(v, t);
    if (r == ZE_RESULT_SUCCESS) t->pfnInit = zeInit_;
    return r;
}

ZE_DLLEXPORT ze_result_t ZE_APICALL zeGetDriverProcAddrTable(ze_api_version_t v,
                                                             ze_driver_dditable_t* t) {
    ze_result_t r = table(v, t);
    if (r != ZE_RESULT_SUCCESS) return r;
    t->pfnGet = DriverGet;
    t->pfnGetApiVersion = DriverGetApiVersion;
    t->pfnGetProperties = DriverGetProperties;
    t->pfnGetIpcProperties = DriverGetIpcProperties;
    t->pfnGetExtensionProperties = DriverGetExtensionProperties;
    return r;
}

ZE_DLLEXPORT ze_result_t ZE_APICALL zeGetDeviceProcAddrTable(ze_api_version_t v,
                                                             ze_device_dditable_t* t) {
    ze_result_t r = table(v, t);
    if (r != ZE_RESULT_SUCCESS) return r;
    t->pfnGet = DeviceGet;
    t->pfnGetSubDevices = DeviceGetSubDevices;
    t->pfnGetProperties = DeviceGetProperties;
    t->pfnGetCommandQueueGroupProperties = DeviceGetCommandQueueGroupProperties;
    return r;
}

ZE_DLLEXPORT ze_result_t ZE_APICALL zeGetContextProcAddrTable(ze_api_version_t v,
                                                              ze_context_dditable_t* t) {
    ze_result_t r = table(v, t);
    if (r != ZE_RESULT_SUCCESS) return r;
    t->pfnCreate = ContextCreate;
    t->pfnDestroy = ContextDestroy;
    t->pfnGetStatus = ContextGetStatus;
    return r;
}

ZE_DLLEXPORT ze_result_t ZE_APICALL zeGetCommandQueueProcAddrTable(ze_api_version_t v,
                                                                   ze_command_queue_dditable_t* t) {
    ze_result_t r = table(v, t);
    if (r != ZE_RESULT_SUCCESS) return r;
    t->pfnCreate = QueueCreate;
    t->pfnDestroy = QueueDestroy;
    t->pfnExecuteCommandLists = QueueExecute;
    t->pfnSynchronize = QueueSynchronize;
    return r;
}

ZE_DLLEXPORT ze_result_t ZE_APICALL zeGetCommandListProcAddrTable(ze_api_version_t v,
                                                                  ze_command_list_dditable_t* t) {
    ze_result_t r = table(v, t);
    if (r != ZE_RESULT_SUCCESS) return r;
    t->pfnCreate = ListCreate;
    t->pfnCreateImmediate = ListCreateImmediate;
    t->pfnDestroy = ListDestroy;
    t->pfnClose = ListClose;
    t->pfnReset = ListReset;
    t->pfnAppendBarrier = ListAppendBarrier;
    t->pfnAppendMemoryCopy = ListAppendMemoryCopy;
    t->pfnAppendMemoryFill = ListAppendMemoryFill;
    t->pfnAppendSignalEvent = ListAppendSignalEvent;
    t->pfnAppendWaitOnEvents = ListAppendWaitOnEvents;
    t->pfnAppendEventReset = ListAppendEventReset;
    return r;
}

ZE_DLLEXPORT ze_result_t ZE_APICALL zeGetFenceProcAddrTable(ze_api_version_t v,
                                                            ze_fence_dditable_t* t) {
    ze_result_t r = table(v, t);
    if (r != ZE_RESULT_SUCCESS) return r;
    t->pfnCreate = FenceCreate;
    t->pfnDestroy = FenceDestroy;
    t->pfnHostSynchronize = FenceHostSynchronize;
    t->pfnQueryStatus = FenceQueryStatus;
    t->pfnReset = FenceReset;
    return r;
}

ZE_DLLEXPORT ze_result_t ZE_APICALL zeGetEventPoolProcAddrTable(ze_api_version_t v,
                                                                ze_event_pool_dditable_t* t) {
    ze_result_t r = table(v, t);
    if (r != ZE_RESULT_SUCCESS) return r;
    t->pfnCreate = PoolCreate;
    t->pfnDestroy = PoolDestroy;
    return r;
}

ZE_DLLEXPORT ze_result_t ZE_APICALL zeGetEventProcAddrTable(ze_api_version_t v,
                                                            ze_event_dditable_t* t) {
    ze_result_t r = table(v, t);
    if (r != ZE_RESULT_SUCCESS) return r;
    t->pfnCreate = EventCreate;
    t->pfnDestroy = EventDestroy;
    t->pfnHostSignal = EventHostSignal;
    t->pfnHostSynchronize = EventHostSynchronize;
    t->pfnQueryStatus = EventQueryStatus;
    t->pfnHostReset = EventHostReset;
    return r;
}

ZE_DLLEXPORT ze_result_t ZE_APICALL zeGetMemProcAddrTable(ze_api_version_t v,
                                                          ze_mem_dditable_t* t) {
    ze_result_t r = table(v, t);
    if (r != ZE_RESULT_SUCCESS) return r;
    t->pfnAllocShared = MemAllocShared;
    t->pfnAllocDevice = MemAllocDevice;
    t->pfnAllocHost = MemAllocHost;
    t->pfnFree = MemFree;
    t->pfnGetAllocProperties = MemGetAllocProperties;
    t->pfnGetAddressRange = MemGetAddressRange;
    t->pfnGetIpcHandle = MemGetIpcHandle;
    t->pfnOpenIpcHandle = MemOpenIpcHandle;
    t->pfnCloseIpcHandle = MemCloseIpcHandle;
    return r;
}

#define CCL_ZE_EMPTY_TABLE(fn, type) \
    ZE_DLLEXPORT ze_result_t ZE_APICALL fn(ze_api_version_t v, type* t) { return table(v, t); }
CCL_ZE_EMPTY_TABLE(zeGetImageProcAddrTable, ze_image_dditable_t)
CCL_ZE_EMPTY_TABLE(zeGetKernelProcAddrTable, ze_kernel_dditable_t)
CCL_ZE_EMPTY_TABLE(zeGetModuleBuildLogProcAddrTable, ze_module_build_log_dditable_t)
CCL_ZE_EMPTY_TABLE(zeGetModuleProcAddrTable, ze_module_dditable_t)
CCL_ZE_EMPTY_TABLE(zeGetPhysicalMemProcAddrTable, ze_physical_mem_dditable_t)
CCL_ZE_EMPTY_TABLE(zeGetSamplerProcAddrTable, ze_sampler_dditable_t)
CCL_ZE_EMPTY_TABLE(zeGetVirtualMemProcAddrTable, ze_virtual_mem_dditable_t)
// Tools (zet) and sysman (zes): the loader's zeInit fails unless every driver has them.
CCL_ZE_EMPTY_TABLE(zetGetDeviceProcAddrTable, zet_device_dditable_t)
CCL_ZE_EMPTY_TABLE(zetGetContextProcAddrTable, zet_context_dditable_t)
CCL_ZE_EMPTY_TABLE(zetGetCommandListProcAddrTable, zet_command_list_dditable_t)
CCL_ZE_EMPTY_TABLE(zetGetModuleProcAddrTable, zet_module_dditable_t)
CCL_ZE_EMPTY_TABLE(zetGetKernelProcAddrTable, zet_kernel_dditable_t)
CCL_ZE_EMPTY_TABLE(zetGetMetricGroupProcAddrTable, zet_metric_group_dditable_t)
CCL_ZE_EMPTY_TABLE(zetGetMetricGroupExpProcAddrTable, zet_metric_group_exp_dditable_t)
CCL_ZE_EMPTY_TABLE(zetGetMetricProcAddrTable, zet_metric_dditable_t)
CCL_ZE_EMPTY_TABLE(zetGetMetricStreamerProcAddrTable, zet_metric_streamer_dditable_t)
CCL_ZE_EMPTY_TABLE(zetGetMetricQueryPoolProcAddrTable, zet_metric_query_pool_dditable_t)
CCL_ZE_EMPTY_TABLE(zetGetMetricQueryProcAddrTable, zet_metric_query_dditable_t)
CCL_ZE_EMPTY_TABLE(zetGetTracerExpProcAddrTable, zet_tracer_exp_dditable_t)
CCL_ZE_EMPTY_TABLE(zetGetDebugProcAddrTable, zet_debug_dditable_t)
CCL_ZE_EMPTY_TABLE(zesGetDriverProcAddrTable, zes_driver_dditable_t)
CCL_ZE_EMPTY_TABLE(zesGetDeviceProcAddrTable, zes_device_dditable_t)
CCL_ZE_EMPTY_TABLE(zesGetSchedulerProcAddrTable, zes_scheduler_dditable_t)
CCL_ZE_EMPTY_TABLE(zesGetPerformanceFactorProcAddrTable, zes_performance_factor_dditable_t)
CCL_ZE_EMPTY_TABLE(zesGetPowerProcAddrTable, zes_power_dditable_t)
CCL_ZE_EMPTY_TABLE(zesGetFrequencyProcAddrTable, zes_frequency_dditable_t)
CCL_ZE_EMPTY_TABLE(zesGetEngineProcAddrTable, zes_engine_dditable_t)
CCL_ZE_EMPTY_TABLE(zesGetStandbyProcAddrTable, zes_standby_dditable_t)
CCL_ZE_EMPTY_TABLE(zesGetFirmwareProcAddrTable, zes_firmware_dditable_t)
CCL_ZE_EMPTY_TABLE(zesGetMemoryProcAddrTable, zes_memory_dditable_t)
CCL_ZE_EMPTY_TABLE(zesGetFabricPortProcAddrTable, zes_fabric_port_dditable_t)
CCL_ZE_EMPTY_TABLE(zesGetTemperatureProcAddrTable, zes_temperature_dditable_t)
CCL_ZE_EMPTY_TABLE(zesGetPsuProcAddrTable, zes_psu_dditable_t)
CCL_ZE_EMPTY_TABLE(zesGetFanProcAddrTable, zes_fan_dditable_t)
CCL_ZE_EMPTY_TABLE(zesGetLedProcAddrTable, zes_led_dditable_t)
CCL_ZE_EMPTY_TABLE(zesGetRasProcAddrTable, zes_ras_dditable_t)
CCL_ZE_EMPTY_TABLE(zesGetDiagnosticsProcAddrTable, zes_diagnostics_dditable_t)

}  // extern "C"

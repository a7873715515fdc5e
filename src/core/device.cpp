#include "core/device.h"

#include <dlfcn.h>
#include <level_zero/ze_api.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"

namespace ccl::ze {

namespace {

// The Level Zero functions ccl calls, looked up in the loader.
// clang-format off (clang-format 14 never settles on this macro's backslashes)
#define CCL_ZE_FUNCTIONS(X)                   \
    X(zeInit)                                 \
    X(zeDriverGet)                            \
    X(zeDeviceGet)                            \
    X(zeDeviceGetCommandQueueGroupProperties) \
    X(zeContextCreate)                        \
    X(zeContextDestroy)                       \
    X(zeMemGetAllocProperties)                \
    X(zeMemGetAddressRange)                   \
    X(zeMemAllocHost)                         \
    X(zeMemFree)                              \
    X(zeMemGetIpcHandle)                      \
    X(zeMemOpenIpcHandle)                     \
    X(zeMemCloseIpcHandle)                    \
    X(zeCommandListCreate)                    \
    X(zeCommandListCreateImmediate)           \
    X(zeCommandListClose)                     \
    X(zeCommandListReset)                     \
    X(zeCommandListDestroy)                   \
    X(zeCommandListAppendMemoryCopy)          \
    X(zeCommandListAppendBarrier)             \
    X(zeCommandQueueExecuteCommandLists)      \
    X(zeEventPoolCreate)                      \
    X(zeEventPoolDestroy)                     \
    X(zeEventCreate)                          \
    X(zeEventDestroy)                         \
    X(zeEventHostSynchronize)                 \
    X(zeEventHostReset)                       \
    X(zeFenceCreate)                          \
    X(zeFenceDestroy)                         \
    X(zeFenceHostSynchronize)                 \
    X(zeFenceReset)
// clang-format on

struct Api {
#define CCL_ZE_MEMBER(name) decltype(&::name) name = nullptr;
    CCL_ZE_FUNCTIONS(CCL_ZE_MEMBER)
#undef CCL_ZE_MEMBER
};

std::string ze_error(const char* call, ze_result_t r) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%x", unsigned(r));
    return std::string("Level Zero ") + call + " failed (" + hex + ")";
}

void check(const char* call, ze_result_t r) {
    if (r != ZE_RESULT_SUCCESS) throw Error(CCL_ERROR_SYSTEM, ze_error(call, r));
}
#define ZE_CHECK(call, ...) check(#call, api().call(__VA_ARGS__))

// A driver ccl uses: its own context there, and its visible devices.
struct DriverCtx {
    ze_driver_handle_t driver = nullptr;
    ze_context_handle_t context = nullptr;
    std::vector<ze_device_handle_t> devices;
};

class Runtime;
Runtime* g_runtime = nullptr;  // set once by init_state, under its call_once
std::string g_off_reason;

class Runtime {
public:
    // Loads the loader and initializes it; on failure, `reason` says why and nothing is kept.
    bool load(std::string* reason, bool* tried_init) {
        const Config& cfg = config();
        const std::string path =
            cfg.ze_library_path.empty() ? "libze_loader.so.1" : cfg.ze_library_path;
        lib_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!lib_) {
            *reason = "cannot load the Level Zero loader " + path + ": " + ::dlerror();
            return false;
        }
#define CCL_ZE_LOOKUP(name)                                                  \
    api_.name = reinterpret_cast<decltype(api_.name)>(::dlsym(lib_, #name)); \
    if (!api_.name) {                                                        \
        *reason = "the Level Zero loader " + path + " lacks " #name;         \
        return false;                                                        \
    }
        CCL_ZE_FUNCTIONS(CCL_ZE_LOOKUP)
#undef CCL_ZE_LOOKUP
        // After a failed zeInit no other ze call is made: some drivers crash the loader then.
        *tried_init = true;
        if (ze_result_t r = api_.zeInit(0); r != ZE_RESULT_SUCCESS) {
            *reason = ze_error("zeInit", r) + ": no Level Zero driver or device";
            return false;
        }
        uint32_t n = 0;
        if (api_.zeDriverGet(&n, nullptr) != ZE_RESULT_SUCCESS || n == 0) {
            *reason = "Level Zero has no driver";
            return false;
        }
        std::vector<ze_driver_handle_t> drivers(n);
        if (api_.zeDriverGet(&n, drivers.data()) != ZE_RESULT_SUCCESS) {
            *reason = "zeDriverGet failed";
            return false;
        }
        for (ze_driver_handle_t d : drivers) {
            DriverCtx dc;
            dc.driver = d;
            // Devices hidden by ZE_AFFINITY_MASK are not listed (the driver applies it).
            uint32_t nd = 0;
            if (api_.zeDeviceGet(d, &nd, nullptr) != ZE_RESULT_SUCCESS || nd == 0) continue;
            dc.devices.resize(nd);
            if (api_.zeDeviceGet(d, &nd, dc.devices.data()) != ZE_RESULT_SUCCESS) continue;
            ze_context_desc_t desc{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
            if (api_.zeContextCreate(d, &desc, &dc.context) != ZE_RESULT_SUCCESS) continue;
            drivers_.push_back(std::move(dc));
        }
        if (drivers_.empty()) {
            *reason = "no Level Zero driver has a visible device (ZE_AFFINITY_MASK?)";
            return false;
        }
        return true;
    }

    ~Runtime() { shutdown(); }

    // Releases ccl's Level Zero objects. At exit this runs from an atexit handler registered
    // after the loader was loaded, so before the loader's and drivers' own destructors. The
    // loader itself stays loaded: unloading it at exit races its own clean-up.
    void shutdown() {
        std::lock_guard<std::mutex> lock(mu);
        if (!lib_ || down_) return;
        down_ = true;
        copiers_.clear();
        for (auto& [size, list] : pool_)
            for (char* p : list) api_.zeMemFree(drivers_.front().context, p);
        for (DriverCtx& d : drivers_)
            if (d.context) api_.zeContextDestroy(d.context);
    }

    const Api& api() const { return api_; }
    const std::vector<DriverCtx>& drivers() const { return drivers_; }
    ze_context_handle_t context_of(ze_device_handle_t dev) const {
        for (const DriverCtx& d : drivers_)
            if (std::find(d.devices.begin(), d.devices.end(), dev) != d.devices.end())
                return d.context;
        return nullptr;
    }

    bool down() const { return down_; }

    std::mutex mu;  // guards copiers_, pool_ and down_
    std::map<ze_device_handle_t, std::unique_ptr<Copier>> copiers_;
    std::map<size_t, std::vector<char*>> pool_;
    size_t pooled_ = 0;

private:
    void* lib_ = nullptr;
    bool down_ = false;
    Api api_;
    std::vector<DriverCtx> drivers_;
};

Runtime& rt() { return *g_runtime; }
const Api& api() { return rt().api(); }

std::optional<Runtime>& runtime_storage() {
    static std::optional<Runtime> r;
    return r;
}

// Waits for an event until the deadline, in slices (so that a deadline far off is still checked).
void wait_event(ze_event_handle_t ev, std::chrono::steady_clock::time_point deadline,
                const char* what) {
    for (;;) {
        ze_result_t r = api().zeEventHostSynchronize(ev, 10'000'000);  // 10 ms
        if (r == ZE_RESULT_SUCCESS) return;
        if (r != ZE_RESULT_NOT_READY) check("zeEventHostSynchronize", r);
        if (std::chrono::steady_clock::now() > deadline)
            throw Error(CCL_ERROR_TIMEOUT,
                        std::string(what) + " did not complete before CCL_TIMEOUT");
    }
}

// One event from a pool of its own, for host waits on copies.
class HostEvent {
public:
    explicit HostEvent(ze_context_handle_t ctx) {
        ze_event_pool_desc_t pd{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr,
                                ZE_EVENT_POOL_FLAG_HOST_VISIBLE, 1};
        ZE_CHECK(zeEventPoolCreate, ctx, &pd, 0, nullptr, &pool_);
        ze_event_desc_t ed{ZE_STRUCTURE_TYPE_EVENT_DESC, nullptr, 0, ZE_EVENT_SCOPE_FLAG_HOST,
                           ZE_EVENT_SCOPE_FLAG_HOST};
        if (ze_result_t r = api().zeEventCreate(pool_, &ed, &event_); r != ZE_RESULT_SUCCESS) {
            api().zeEventPoolDestroy(pool_);
            check("zeEventCreate", r);
        }
    }
    ~HostEvent() {
        api().zeEventDestroy(event_);
        api().zeEventPoolDestroy(pool_);
    }
    HostEvent(const HostEvent&) = delete;
    HostEvent& operator=(const HostEvent&) = delete;
    ze_event_handle_t get() const { return event_; }

private:
    ze_event_pool_handle_t pool_ = nullptr;
    ze_event_handle_t event_ = nullptr;
};

// Appends the copies to an immediate list, the last signalling `ev`, and waits for it.
void copy_on_list(ze_command_list_handle_t list, HostEvent& ev, const std::vector<CopyOp>& ops,
                  std::chrono::steady_clock::time_point deadline) {
    if (ops.empty()) return;
    ZE_CHECK(zeEventHostReset, ev.get());
    for (size_t i = 0; i < ops.size(); ++i)
        ZE_CHECK(zeCommandListAppendMemoryCopy, list, ops[i].dst, ops[i].src, ops[i].bytes,
                 i + 1 == ops.size() ? ev.get() : nullptr, 0, nullptr);
    wait_event(ev.get(), deadline, "a device copy");
}

// The queue group ordinal of a copy engine (copy only if there is one), else of any group that
// copies.
uint32_t copy_ordinal(ze_device_handle_t dev) {
    uint32_t n = 0;
    ZE_CHECK(zeDeviceGetCommandQueueGroupProperties, dev, &n, nullptr);
    std::vector<ze_command_queue_group_properties_t> groups(n);
    for (auto& g : groups) g = {ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES, nullptr, 0, 0, 0};
    ZE_CHECK(zeDeviceGetCommandQueueGroupProperties, dev, &n, groups.data());
    std::optional<uint32_t> any;
    for (uint32_t i = 0; i < n; ++i) {
        if (!(groups[i].flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY)) continue;
        if (!(groups[i].flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE)) return i;
        if (!any) any = i;
    }
    if (!any) throw Error(CCL_ERROR_UNSUPPORTED, "the device has no queue group that copies");
    return *any;
}

// ccl's own copies on a device: an immediate list on its copy engine, in ccl's context.
class OwnCopier final : public Copier {
public:
    OwnCopier(ze_context_handle_t ctx, ze_device_handle_t dev) : event_(ctx) {
        ze_command_queue_desc_t qd{ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC,
                                   nullptr,
                                   copy_ordinal(dev),
                                   0,
                                   0,
                                   ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
                                   ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
        ZE_CHECK(zeCommandListCreateImmediate, ctx, dev, &qd, &list_);
    }
    ~OwnCopier() override { api().zeCommandListDestroy(list_); }
    void copy(const std::vector<CopyOp>& ops,
              std::chrono::steady_clock::time_point deadline) override {
        std::lock_guard<std::mutex> lock(mu_);  // user threads and progress workers share it
        copy_on_list(list_, event_, ops, deadline);
    }
    bool can_append() const override { return true; }
    void append(const std::vector<CopyOp>& ops, void* signal) override {
        std::lock_guard<std::mutex> lock(mu_);
        auto ev = static_cast<ze_event_handle_t>(signal);
        if (ops.empty()) {
            ZE_CHECK(zeCommandListAppendBarrier, list_, ev, 0, nullptr);
            return;
        }
        for (size_t i = 0; i < ops.size(); ++i)
            ZE_CHECK(zeCommandListAppendMemoryCopy, list_, ops[i].dst, ops[i].src, ops[i].bytes,
                     i + 1 == ops.size() ? ev : nullptr, 0, nullptr);
    }

private:
    std::mutex mu_;
    HostEvent event_;
    ze_command_list_handle_t list_ = nullptr;
};

}  // namespace

void Copier::append(const std::vector<CopyOp>&, void*) {
    throw Error(CCL_ERROR_INTERNAL, "this copier cannot append copies without waiting");
}

CopyEvents::CopyEvents(void* device, size_t n) {
    require_enabled("device copies");
    ze_context_handle_t ctx = rt().context_of(static_cast<ze_device_handle_t>(device));
    if (!ctx) throw Error(CCL_ERROR_INVALID_ARGUMENT, "a buffer is on a device ccl cannot see");
    ze_event_pool_desc_t pd{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr,
                            ZE_EVENT_POOL_FLAG_HOST_VISIBLE, uint32_t(n)};
    ze_event_pool_handle_t pool = nullptr;
    ZE_CHECK(zeEventPoolCreate, ctx, &pd, 0, nullptr, &pool);
    pool_ = pool;
    for (size_t i = 0; i < n; ++i) {
        ze_event_desc_t ed{ZE_STRUCTURE_TYPE_EVENT_DESC, nullptr, uint32_t(i),
                           ZE_EVENT_SCOPE_FLAG_HOST, ZE_EVENT_SCOPE_FLAG_HOST};
        ze_event_handle_t ev = nullptr;
        if (ze_result_t r = api().zeEventCreate(pool, &ed, &ev); r != ZE_RESULT_SUCCESS) {
            release();  // what was made so far
            check("zeEventCreate", r);
        }
        events_.push_back(ev);
    }
}

CopyEvents::~CopyEvents() { release(); }

void CopyEvents::release() {
    for (void* e : events_) api().zeEventDestroy(static_cast<ze_event_handle_t>(e));
    events_.clear();
    if (pool_) api().zeEventPoolDestroy(static_cast<ze_event_pool_handle_t>(pool_));
    pool_ = nullptr;
}

void* CopyEvents::get(size_t i) const { return events_.at(i); }

void CopyEvents::wait(size_t i, std::chrono::steady_clock::time_point deadline) const {
    wait_event(static_cast<ze_event_handle_t>(events_.at(i)), deadline, "a device copy");
}

const char* mem_kind_name(MemKind kind) {
    switch (kind) {
        case MemKind::plain: return "plain host memory";
        case MemKind::host: return "Level Zero host memory";
        case MemKind::shared: return "Level Zero shared memory";
        case MemKind::device: return "Level Zero device memory";
    }
    return "?";
}

// Whether the process holds a Level Zero loader (loaded by the application).
bool loader_in_process() {
    void* h = ::dlopen("libze_loader.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h) ::dlclose(h);
    return h != nullptr;
}

int init_state() {
    static std::once_flag once;
    std::call_once(once, [] {
        int state = 1;
        std::string reason;
        // Asked before ccl loads it: only the application's loader counts.
        const bool app_loader = loader_in_process();
        bool tried = false;  // ccl's own zeInit ran (and failed): so would the application's
        try {
            if (!config().ze_enable) {
                reason = "CCL_ZE_ENABLE=0";
            } else {
                auto& storage = runtime_storage();
                storage.emplace();
                if (storage->load(&reason, &tried)) {
                    g_runtime = &*storage;
                    std::atexit([] { runtime_storage()->shutdown(); });
                    state = 2;
                    log().info("XPU: Level Zero on, {} driver(s)", storage->drivers().size());
                } else {
                    storage.reset();
                }
            }
        } catch (const Error& e) {  // a malformed variable: XPU stays off, the call reports it
            reason = e.what();
        }
        if (state != 2) {
            g_off_reason = reason;
            // The application uses Level Zero but ccl does not (disabled, another path): it may
            // pass device memory ccl cannot stage, so calls check their buffers (docs/xpu.md).
            if (app_loader && !tried) state = 3;
            log().info("XPU: off ({}){}", reason,
                       state == 3 ? "; the application has a Level Zero loader: buffers are "
                                    "checked for readability"
                                  : "");
        }
        g_state.store(state, std::memory_order_release);
    });
    return g_state.load(std::memory_order_acquire);
}

std::string off_reason() {
    init_state();
    return g_off_reason;
}

void require_enabled(const char* what) {
    if (!enabled())
        throw Error(CCL_ERROR_UNSUPPORTED,
                    std::string(what) + " needs Level Zero, which is off: " + off_reason());
}

MemInfo classify(const void* p) {
    MemInfo info;
    if (!p || g_state.load(std::memory_order_acquire) != 2) return info;
    for (const DriverCtx& d : rt().drivers()) {
        ze_memory_allocation_properties_t props{ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES,
                                                nullptr, ZE_MEMORY_TYPE_UNKNOWN, 0, 0};
        ze_device_handle_t dev = nullptr;
        if (api().zeMemGetAllocProperties(d.context, p, &props, &dev) != ZE_RESULT_SUCCESS)
            continue;
        switch (props.type) {
            case ZE_MEMORY_TYPE_HOST: info.kind = MemKind::host; break;
            case ZE_MEMORY_TYPE_SHARED: info.kind = MemKind::shared; break;
            case ZE_MEMORY_TYPE_DEVICE: info.kind = MemKind::device; break;
            default: continue;
        }
        info.device = dev;
        info.id = props.id;
        if (info.kind == MemKind::device &&
            std::find(d.devices.begin(), d.devices.end(), dev) == d.devices.end())
            throw Error(CCL_ERROR_INVALID_ARGUMENT,
                        "a buffer is on a device that ZE_AFFINITY_MASK hides from ccl");
        return info;
    }
    return info;
}

void check_readable(const void* p, size_t bytes, const char* name) {
    if (!p || bytes == 0) return;
    // process_vm_readv on ourselves reports unreadable memory as EFAULT instead of faulting.
    auto readable = [](const void* q) {
        char c;
        iovec local{&c, 1}, remote{const_cast<void*>(q), 1};
        ssize_t n = ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0);
        return n == 1 || errno != EFAULT;  // EPERM (seccomp): cannot tell, assume readable
    };
    const char* c = static_cast<const char*>(p);
    if (readable(c) && readable(c + bytes - 1)) return;
    throw Error(CCL_ERROR_INVALID_ARGUMENT,
                std::string(name) +
                    " is not readable host memory (device memory?) and XPU support is off: " +
                    off_reason());
}

Copier& copier_for(void* device) {
    require_enabled("a device buffer");
    auto dev = static_cast<ze_device_handle_t>(device);
    std::lock_guard<std::mutex> lock(rt().mu);
    auto& c = rt().copiers_[dev];
    if (!c) {
        ze_context_handle_t ctx = rt().context_of(dev);
        if (!ctx) throw Error(CCL_ERROR_INVALID_ARGUMENT, "a buffer is on a device ccl cannot see");
        c = std::make_unique<OwnCopier>(ctx, dev);
    }
    return *c;
}

namespace {
size_t pool_class(size_t bytes) { return std::max<size_t>(std::bit_ceil(bytes), 4096); }
constexpr size_t kPoolMax = 8;  // buffers kept for reuse
}  // namespace

HostBuffer::HostBuffer(size_t bytes) {
    require_enabled("staging");
    size_ = pool_class(bytes);
    {
        std::lock_guard<std::mutex> lock(rt().mu);
        auto it = rt().pool_.find(size_);
        if (it != rt().pool_.end() && !it->second.empty()) {
            data_ = it->second.back();
            it->second.pop_back();
            --rt().pooled_;
            return;
        }
    }
    ze_host_mem_alloc_desc_t desc{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
    void* p = nullptr;
    ze_result_t r = api().zeMemAllocHost(rt().drivers().front().context, &desc, size_, 64, &p);
    if (r != ZE_RESULT_SUCCESS)
        throw Error(CCL_ERROR_OUT_OF_MEMORY, ze_error("zeMemAllocHost", r) + " for " +
                                                 std::to_string(size_) + " staging bytes");
    data_ = static_cast<char*>(p);
}

HostBuffer::~HostBuffer() {
    if (!data_) return;
    std::lock_guard<std::mutex> lock(rt().mu);
    if (rt().down()) return;  // at exit: the context is gone
    if (rt().pooled_ < kPoolMax) {
        rt().pool_[size_].push_back(data_);
        ++rt().pooled_;
        return;
    }
    api().zeMemFree(rt().drivers().front().context, data_);
}

struct Stream::Impl {
    Kind kind;
    ze_context_handle_t context;
    ze_device_handle_t device;
    ze_command_list_handle_t user_list = nullptr;  // command_list
    ze_command_queue_handle_t queue = nullptr;     // command_queue
    ze_command_list_handle_t own_list = nullptr;   // command_queue: ccl's copies, executed on it
    ze_fence_handle_t fence = nullptr;
    std::optional<HostEvent> event;
    std::mutex mu;
};

Stream::Stream(Kind kind, void* context, void* device, void* handle)
    : impl_(std::make_unique<Impl>()) {
    require_enabled("a Level Zero stream");
    Impl& s = *impl_;
    s.kind = kind;
    s.context = static_cast<ze_context_handle_t>(context);
    s.device = static_cast<ze_device_handle_t>(device);
    if (kind == Kind::command_list) {
        s.user_list = static_cast<ze_command_list_handle_t>(handle);
        s.event.emplace(s.context);
        return;
    }
    s.queue = static_cast<ze_command_queue_handle_t>(handle);
    ze_fence_desc_t fd{ZE_STRUCTURE_TYPE_FENCE_DESC, nullptr, 0};
    ZE_CHECK(zeFenceCreate, s.queue, &fd, &s.fence);
    // ccl's list must be of the queue's group; ordinal 0 is the group every device has.
    ze_command_list_desc_t ld{ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC, nullptr, 0, 0};
    if (ze_result_t r = api().zeCommandListCreate(s.context, s.device, &ld, &s.own_list);
        r != ZE_RESULT_SUCCESS) {
        api().zeFenceDestroy(s.fence);
        check("zeCommandListCreate", r);
    }
}

Stream::~Stream() {
    if (impl_->own_list) api().zeCommandListDestroy(impl_->own_list);
    if (impl_->fence) api().zeFenceDestroy(impl_->fence);
}

void Stream::copy(const std::vector<CopyOp>& ops, std::chrono::steady_clock::time_point deadline) {
    Impl& s = *impl_;
    std::lock_guard<std::mutex> lock(s.mu);
    // Even without copies this waits for the work submitted to the stream before.
    if (s.kind == Kind::command_list) {
        // On the user's list: after the work appended before, before the work appended after.
        if (!ops.empty()) {
            copy_on_list(s.user_list, *s.event, ops, deadline);
            return;
        }
        ZE_CHECK(zeEventHostReset, s.event->get());
        ZE_CHECK(zeCommandListAppendBarrier, s.user_list, s.event->get(), 0, nullptr);
        wait_event(s.event->get(), deadline, "the stream's earlier work");
        return;
    }
    ZE_CHECK(zeCommandListReset, s.own_list);
    for (const CopyOp& op : ops)
        ZE_CHECK(zeCommandListAppendMemoryCopy, s.own_list, op.dst, op.src, op.bytes, nullptr, 0,
                 nullptr);
    ZE_CHECK(zeCommandListClose, s.own_list);
    ZE_CHECK(zeFenceReset, s.fence);
    ZE_CHECK(zeCommandQueueExecuteCommandLists, s.queue, 1, &s.own_list, s.fence);
    for (;;) {
        ze_result_t r = api().zeFenceHostSynchronize(s.fence, 10'000'000);
        if (r == ZE_RESULT_SUCCESS) return;
        if (r != ZE_RESULT_NOT_READY) check("zeFenceHostSynchronize", r);
        if (std::chrono::steady_clock::now() > deadline)
            throw Error(CCL_ERROR_TIMEOUT,
                        "a device copy on the stream's queue did not complete "
                        "before CCL_TIMEOUT");
    }
}

namespace {

// Handles of this process's allocations (by base), and peers' allocations opened here.
struct IpcState {
    struct Own {
        uint64_t id;
        IpcRecord rec;
    };
    struct Opened {
        uint64_t owner, id, base, size;
        ze_context_handle_t context;
        void* mapped;
    };
    std::mutex mu;
    std::map<uint64_t, Own> own;
    std::vector<Opened> opened;  // oldest first
    size_t opens = 0;
    ~IpcState() {
        // At exit after the runtime shut down, the mappings go with the process.
        if (g_runtime && !rt().down())
            for (const Opened& o : opened) api().zeMemCloseIpcHandle(o.context, o.mapped);
    }
};
IpcState& ipc() {
    static IpcState s;
    return s;
}
constexpr size_t kMaxOpened = 64;

}  // namespace

IpcRecord ipc_record(const void* p, const MemInfo& info) {
    require_enabled("IPC");
    ze_context_handle_t ctx = rt().context_of(static_cast<ze_device_handle_t>(info.device));
    void* base = nullptr;
    size_t size = 0;
    ZE_CHECK(zeMemGetAddressRange, ctx, p, &base, &size);
    const auto b = reinterpret_cast<uintptr_t>(base);
    const uint64_t offset = uint64_t(static_cast<const char*>(p) - static_cast<const char*>(base));
    IpcState& st = ipc();
    std::lock_guard<std::mutex> lock(st.mu);
    if (auto it = st.own.find(b);
        it != st.own.end() && it->second.id == info.id && it->second.rec.size == size) {
        IpcRecord rec = it->second.rec;
        rec.offset = offset;
        return rec;
    }
    ze_ipc_mem_handle_t h;
    ZE_CHECK(zeMemGetIpcHandle, ctx, base, &h);
    IpcRecord rec;
    static_assert(sizeof(h.data) == sizeof(rec.handle));
    std::memcpy(rec.handle, h.data, sizeof(rec.handle));
    rec.owner = uint64_t(::getpid());
    rec.id = info.id;
    rec.base = b;
    rec.size = size;
    st.own[b] = {info.id, rec};
    rec.offset = offset;
    return rec;
}

void* ipc_open(const IpcRecord& rec, void* device) {
    require_enabled("IPC");
    auto dev = static_cast<ze_device_handle_t>(device);
    IpcState& st = ipc();
    std::lock_guard<std::mutex> lock(st.mu);
    for (const auto& o : st.opened)
        if (o.owner == rec.owner && o.id == rec.id && o.base == rec.base && o.size == rec.size)
            return static_cast<char*>(o.mapped) + rec.offset;
    // An entry of this owner over the same addresses with another id: the owner freed that
    // memory (and maybe allocated again there). Its old mapping is never used again.
    std::erase_if(st.opened, [&](const IpcState::Opened& o) {
        bool stale =
            o.owner == rec.owner && o.base < rec.base + rec.size && rec.base < o.base + o.size;
        if (stale) api().zeMemCloseIpcHandle(o.context, o.mapped);
        return stale;
    });
    if (st.opened.size() >= kMaxOpened) {
        api().zeMemCloseIpcHandle(st.opened.front().context, st.opened.front().mapped);
        st.opened.erase(st.opened.begin());
    }
    ze_ipc_mem_handle_t h;
    std::memcpy(h.data, rec.handle, sizeof(h.data));
    ze_context_handle_t ctx = rt().context_of(dev);
    void* mapped = nullptr;
    ze_result_t r = api().zeMemOpenIpcHandle(ctx, dev, h, 0, &mapped);
    if (r != ZE_RESULT_SUCCESS)
        throw Error(CCL_ERROR_SYSTEM, ze_error("zeMemOpenIpcHandle", r) + " for process " +
                                          std::to_string(rec.owner) + "'s device buffer");
    ++st.opens;
    st.opened.push_back({rec.owner, rec.id, rec.base, rec.size, ctx, mapped});
    return static_cast<char*>(mapped) + rec.offset;
}

size_t ipc_opens() {
    std::lock_guard<std::mutex> lock(ipc().mu);
    return ipc().opens;
}

}  // namespace ccl::ze

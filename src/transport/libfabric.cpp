#include "transport/libfabric.h"

#include <dlfcn.h>
#include <signal.h>

#include <cstring>
#include <string>

#include "base/error.h"
#include "base/immortal.h"
#include "base/log.h"

namespace ccl::transport {

namespace {

static_assert(FI_MAJOR_VERSION == 1, "the symbol versions below are libfabric 1's");

struct Loaded {
    Libfabric api{};
    std::string error;  // why it could not be loaded; empty when it was
};

// The dispositions of the signals libinfinipath takes (see the header), put back as they were
// once the code that may install its handlers (the library's load, a provider's at the first
// fi_getinfo) has run. Not IPATH_NO_BACKTRACE, which would turn them off: setenv is not safe
// while other threads may read the environment, and these processes have threads.
class SignalsKept {
public:
    SignalsKept() {
        for (size_t i = 0; i < kCount; ++i) sigaction(kSignals[i], nullptr, &saved_[i]);
    }
    ~SignalsKept() {
        for (size_t i = 0; i < kCount; ++i) {
            struct sigaction now {};
            if (sigaction(kSignals[i], nullptr, &now) == 0 && !same(now, saved_[i]))
                sigaction(kSignals[i], &saved_[i], nullptr);
        }
    }
    SignalsKept(const SignalsKept&) = delete;
    SignalsKept& operator=(const SignalsKept&) = delete;

private:
    static constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGINT, SIGTERM};
    static constexpr size_t kCount = sizeof(kSignals) / sizeof(kSignals[0]);
    static bool same(const struct sigaction& a, const struct sigaction& b) {
        return a.sa_flags == b.sa_flags &&
               ((a.sa_flags & SA_SIGINFO) ? a.sa_sigaction == b.sa_sigaction
                                          : a.sa_handler == b.sa_handler);
    }
    struct sigaction saved_[kCount] {};
};

// The library's fi_getinfo, called with the signals kept.
decltype(Libfabric::getinfo) raw_getinfo = nullptr;
int getinfo_keeping_signals(uint32_t version, const char* node, const char* service, uint64_t flags,
                            const fi_info* hints, fi_info** info) {
    SignalsKept kept;
    return raw_getinfo(version, node, service, flags, hints, info);
}

// `name` at `version`, the version a program built against these headers binds (objdump -T of
// one linked with -lfabric lists them; tests/fabric/symbol_versions.sh checks this file against
// the installed headers): an older one would read our structures by an older layout. A library
// without symbol versions has the plain name only.
template <class F>
bool bind(void* lib, const char* name, const char* version, F& fn, std::string& error) {
    void* p = dlvsym(lib, name, version);
    if (!p) p = dlsym(lib, name);
    if (!p) error = std::string("libfabric.so.1 has no ") + name + " (" + version + ")";
    fn = reinterpret_cast<F>(p);
    return p != nullptr;
}

Loaded load() {
    Loaded l;
    void* lib = nullptr;
    {
        SignalsKept kept;  // over the constructors of the library and what it links
        lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    }
    if (!lib) {
        const char* why = dlerror();
        l.error = std::string("libfabric.so.1 could not be loaded (") + (why ? why : "?") +
                  "): install the Debian package libfabric1";
        return l;
    }
    Libfabric& a = l.api;
    std::string& e = l.error;
    if (!bind(lib, "fi_getinfo", "FABRIC_1.3", a.getinfo, e) ||
        !bind(lib, "fi_freeinfo", "FABRIC_1.3", a.freeinfo, e) ||
        !bind(lib, "fi_dupinfo", "FABRIC_1.3", a.dupinfo, e) ||
        !bind(lib, "fi_fabric", "FABRIC_1.1", a.fabric, e) ||
        !bind(lib, "fi_strerror", "FABRIC_1.0", a.strerror, e))
        return l;
    raw_getinfo = a.getinfo;  // providers load (and may take signals) at the first fi_getinfo
    a.getinfo = getinfo_keeping_signals;
    log().debug("libfabric.so.1 loaded");
    return l;
}

}  // namespace

const Libfabric& libfabric() {
    // Never freed: a communicator may be destroyed by an exit handler after statics are.
    static const Loaded& loaded = immortal<Loaded>(load());
    if (!loaded.error.empty()) throw Error(CCL_ERROR_UNSUPPORTED, loaded.error);
    return loaded.api;
}

}  // namespace ccl::transport

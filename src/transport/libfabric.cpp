#include "transport/libfabric.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/log.h"

namespace ccl::transport {

namespace {

static_assert(FI_MAJOR_VERSION == 1, "the symbol versions below are libfabric 1's");

struct Loaded {
    Libfabric api{};
    std::string error;  // why it could not be loaded; empty when it was
};

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
    // Before the library's and its providers' constructors run (see the header); a value the
    // user set stays.
    setenv("IPATH_NO_BACKTRACE", "1", 0);
    void* lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
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
    log().debug("libfabric.so.1 loaded");
    return l;
}

}  // namespace

const Libfabric& libfabric() {
    // Never freed: a communicator may be destroyed by an exit handler after statics are.
    static const Loaded& loaded = *new Loaded(load());
    if (!loaded.error.empty()) throw Error(CCL_ERROR_UNSUPPORTED, loaded.error);
    return loaded.api;
}

}  // namespace ccl::transport

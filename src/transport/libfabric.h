// libfabric, loaded at run time (dlopen) when the process opens its first endpoint, i.e. creates
// its first communicator with ranks on other nodes. A process that never goes multi-node never
// loads it, nor the provider libraries it pulls in: Debian's libfabric brings libpsm_infinipath,
// whose libinfinipath installs handlers for SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGINT and SIGTERM
// in its constructor that print a backtrace and exit with code 1 (no core; one rank under torchrun
// hung in one). The dispositions of those signals are put back as they were after the load and
// after each fi_getinfo (which loads the providers that come as plugins).
//
// Only the library's exported functions are looked up here. Every other fi_* call (fi_domain,
// fi_tsend, fi_cq_read, fi_close...) is an inline of libfabric's headers that calls through the
// operation tables of the objects these return, and fi_allocinfo is fi_dupinfo(nullptr).
#pragma once

#include <rdma/fabric.h>

#include <cstdint>

namespace ccl::transport {

struct Libfabric {
    int (*getinfo)(uint32_t version, const char* node, const char* service, uint64_t flags,
                   const fi_info* hints, fi_info** info);
    void (*freeinfo)(fi_info* info);
    fi_info* (*dupinfo)(const fi_info* info);
    int (*fabric)(fi_fabric_attr* attr, fid_fabric** fabric, void* context);
    const char* (*strerror)(int errnum);
};

// Loads libfabric.so.1 the first time (from any thread; once). Throws CCL_ERROR_UNSUPPORTED,
// saying that ranks on several nodes need libfabric.so.1 and why it could not be loaded, then and
// at every later call.
const Libfabric& libfabric();

}  // namespace ccl::transport

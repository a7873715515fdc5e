// Single-copy transfers between co-located processes: cross-memory attach (process_vm_readv /
// process_vm_writev) copies straight from one process's memory into another's, where the arena
// would copy twice (in, then out). Linux allows it between processes of one user unless ptrace is
// restricted (Yama ptrace_scope >= 2, some container seccomp profiles): communicators probe it
// once at creation (Communicator) and fall back to the arena when it fails.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace ccl::shm {

// Copies `bytes` from `remote` in process `pid` to `local`. Throws ccl::Error on failure.
void cma_read(pid_t pid, void* local, const void* remote, size_t bytes);
// Copies `bytes` from `local` to `remote` in process `pid`. Throws ccl::Error on failure.
void cma_write(pid_t pid, void* remote, const void* local, size_t bytes);
// Whether a read of `bytes` at `remote` in `pid` works (the probe); never throws.
bool cma_probe(pid_t pid, const void* remote, size_t bytes);

// Messages from this size on go single-copy where the algorithm allows it: below, the system
// call and page pinning cost more than the second copy.
constexpr size_t kCmaMinBytes = 64u << 10;

}  // namespace ccl::shm

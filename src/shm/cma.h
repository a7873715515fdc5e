// Single-copy transfers between co-located processes: cross-memory attach (process_vm_readv /
// process_vm_writev) copies straight from one process's memory into another's, where the arena
// would copy twice (in, then out). Linux allows it between processes of one user unless ptrace is
// restricted (Yama ptrace_scope >= 2, some container seccomp profiles): communicators probe it
// once at creation (Communicator) and fall back to the arena when it fails.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "base/task.h"
#include "base/wait.h"

namespace ccl::shm {

class Arena;
class Signature;

// Copies `bytes` from `remote` in process `pid` to `local`. Throws ccl::Error on failure
// (CCL_ERROR_PEER_FAILURE where the process is gone: its start time tells a later one with its
// pid).
void cma_read(const ProcessId& pid, void* local, const void* remote, size_t bytes);
// Copies `bytes` from `local` to `remote` in process `pid`. Throws ccl::Error on failure.
void cma_write(const ProcessId& pid, void* remote, const void* local, size_t bytes);
// Large transfers in slices that several threads of this process copy at once: the kernel copies
// a transfer's pages on the thread that asks, at one core's speed, and threads on pages under
// different page tables scale. A transfer is cut at the remote side's multiples of `slice` (2 MiB:
// one page table's span on x86-64) when it is two slices long or more, into at most `threads`
// parts (this thread copies one); one of one to two slices goes in two halves. A transfer waiting
// for its helpers' parts polls for up to `poll` before it sleeps. Process-wide; communicators made
// by a launch set it (CCL_CMA_THREADS, CCL_CMA_SLICE). 1 thread: off. Measurements:
// docs/tuning.md, "Slices and parallel reads".
void cma_parallel(int threads, size_t slice,
                  std::chrono::microseconds poll = std::chrono::microseconds(0));
// The threads a large transfer runs on now (1: it is not cut).
int cma_threads();

// Reads from several processes (an all-to-all's blocks from its peers). Where cma_parallel allows
// threads, the blocks are below two slices each and they add up to kParallelReads or more, two
// threads read them whole, alternate blocks each: readers of different processes pin pages under
// different page tables (docs/tuning.md, "Slices and parallel reads"). Otherwise one after
// another, in the order given (cma_read: large blocks cut).
struct CmaRead {
    ProcessId pid;
    void* local;
    const void* remote;
    size_t bytes;
};
constexpr size_t kParallelReads = size_t(1) << 20;
void cma_read_all(const CmaRead* reads, size_t n);

// Runs `first` on this thread and `second` on a helper thread at once where transfers run on
// several threads (cma_parallel), and returns when both have ended, rethrowing the first
// exception; else one after the other (an exception of `first` skips `second`). For a copy within
// this process beside single-copy reads (an all-to-all's or allgather's own block): the kernel's
// copies leave this process's other cores idle. cma_beside_pays: whether a copy of `bytes` is worth
// a helper's wake-up (microseconds): from 512 KiB, where transfers run on several threads.
void cma_beside(const std::function<void()>& first, const std::function<void()>& second);
bool cma_beside_pays(size_t bytes);

// The probe: reads `bytes` at `remote` in `pid` 64 times. Returns the fastest read's time in
// nanoseconds (a transfer's fixed cost: the system call, and on virtual machines whatever they
// add to it), or a negative number when a read fails; never throws.
double cma_probe(pid_t pid, const void* remote, size_t bytes);

// The per-byte probe (core/tuning judges it), a collective of `arena`'s ranks: each rank copies
// `bytes` that the next rank has just written, from the arena with memcpy and (with `kernel`) from
// that rank's own memory with the kernel's copy, `reps` times each in turn (rounds signed `sig`:
// every rank runs them). *kernel_ns and *user_ns get the fastest of each (nanoseconds), a negative
// *kernel_ns where a read failed or none was made; never throws a copy's failure. `bytes` must fit
// an arena buffer.
Task cma_copy_costs(Arena& arena, Signature sig, size_t bytes, int reps, bool kernel,
                    double* kernel_ns, double* user_ns);

}  // namespace ccl::shm

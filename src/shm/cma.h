// Single-copy transfers between co-located processes: cross-memory attach (process_vm_readv /
// process_vm_writev) copies straight from one process's memory into another's, where the arena
// would copy twice (in, then out). Linux allows it between processes of one user unless ptrace is
// restricted (Yama ptrace_scope >= 2, some container seccomp profiles): communicators probe it
// once at creation (Communicator) and fall back to the arena when it fails.
#pragma once

#include <sys/types.h>

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
// Large transfers in parts that the rank's team (base/team.h) copies at once: the kernel copies a
// transfer's pages on the thread that asks, at one core's speed, and threads on pages under
// different page tables scale. With a team, a transfer of two slices or more (`slice`: 2 MiB, one
// page table's span on x86-64) is cut at the remote side's multiples of the slice into at most
// the team's size of parts; a shorter one of two parts or more (1 MiB each, or a slice if
// smaller) evenly at pages. Process-wide; communicators made by a launch set it (CCL_CMA_SLICE).
// Measurements: docs/tuning.md, "Slices and parallel reads".
void cma_slice(size_t slice);

// Reads from several processes (an all-to-all's blocks from its peers). Where the rank has a team,
// the blocks are below two slices each and they add up to kParallelReads or more, two of its
// threads read them whole, alternate blocks each (three were slower: more readers of each peer):
// readers of different processes pin pages under different page tables (docs/tuning.md, "Slices and
// parallel reads"). Otherwise one after another, in the order given (cma_read: large blocks cut).
struct CmaRead {
    ProcessId pid;
    void* local;
    const void* remote;
    size_t bytes;
};
constexpr size_t kParallelReads = size_t(1) << 20;
void cma_read_all(const CmaRead* reads, size_t n);

// Runs `first` on this thread and `second` on a helper thread at once where the rank has a team,
// and returns when both have ended, rethrowing the first exception; else one after the other (an
// exception of `first` skips `second`). For a copy within this process beside single-copy reads
// (an all-to-all's or allgather's own block): the kernel's copies leave this process's other
// cores idle. cma_beside_pays: whether a copy of `bytes` is worth a helper's wake-up
// (microseconds): from 512 KiB, where the rank has a team.
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

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
// Large transfers in slices that several threads of this process copy at once. The kernel pins
// and copies every page on the thread that asks, so one transfer runs at one core's copy speed
// (about 8 GB/s on the Xeon host). Threads on pages under different page tables scale, where on
// one page table's pages they contend for its lock (the Xeon host, a 16 MiB read: 2.0 ms on one
// thread, 0.54 ms on four; 2 MiB: no faster on four). So a transfer is cut at the remote side's
// multiples of `slice` (2 MiB: one page table's span on x86-64) when it is two slices long or
// more, into at most `threads` parts (this thread copies one). One of a slice or more but less
// than two goes in two halves, which still paid (the host, a sendrecv ring of 2 MiB, medians of
// five launches: 2 ranks 260 us on one thread, 245 in halves; 4 ranks 294, 269). Process-wide;
// communicators made by a launch set it (CCL_CMA_THREADS, CCL_CMA_SLICE). 1 thread: off.
// A transfer waiting for its helpers' parts polls for up to `poll` before it sleeps
// (CCL_POLL_TIME_US, as a rank's waits do): waking it cost tens of microseconds a message.
void cma_parallel(int threads, size_t slice,
                  std::chrono::microseconds poll = std::chrono::microseconds(0));
// The threads a large transfer runs on now (1: it is not cut).
int cma_threads();

// Reads from several processes (an all-to-all's blocks from its peers). Where cma_parallel allows
// threads, the blocks are below two slices each and they add up to kParallelReads or more, two
// threads read them whole (not in halves), alternate blocks each: readers of different processes
// pin pages under different page tables (the Xeon host, 4 ranks each reading 512 KiB from each of
// 3 peers: 319 us on one thread, 177 on two, 203 on three, more readers of each peer then
// contending; in ccl, an all-to-all of 2 MiB: 4 ranks 249-256 -> 215-226 us, 8 ranks 317-433 ->
// 258-276; of 16 MiB at 8 ranks, 2 MiB blocks: 2.4-3.7 ms, where each block in two halves took
// 3.6-7.2). Not for allgathers, whose every block all peers read at once: no faster there.
// Otherwise one after another, in the order given (cma_read: large blocks cut).
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

// The per-byte probe, a collective of `arena`'s ranks: each rank copies `bytes` that the next
// rank has just written, from the arena with memcpy and (with `kernel`) from that rank's own
// memory with the kernel's copy, `reps` times each in turn (rounds signed `sig`: every rank runs
// them). *kernel_ns and *user_ns get the fastest of each (nanoseconds), a negative *kernel_ns
// where a read failed or none was made; never throws a copy's failure. `bytes` must fit an arena
// buffer.
Task cma_copy_costs(Arena& arena, Signature sig, size_t bytes, int reps, bool kernel,
                    double* kernel_ns, double* user_ns);
// Whether the kernel's copies are dear by the byte: a copy from a peer through the kernel took
// `kernel_ns` where memcpy from the arena took `user_ns`. Then a single copy costs more than the
// arena's two, one on each side, at any size that stays in the caches. The 2-core AMD EPYC VM:
// 3.8-8.4x at 64 KiB to 4 MiB (kernel 9-15 GB/s, memcpy from the other core 49-83); the 16-core
// Xeon host: 1.0-2.1x (8-12 against 11-16 GB/s).
inline bool cma_dear_bytes(double kernel_ns, double user_ns) {
    return kernel_ns > 0 && user_ns > 0 && kernel_ns >= 3 * user_ns;
}

// The size from which a block goes single-copy (point to point, all-to-all, allgather) where one
// transfer has the fixed cost `probe_ns`: below it the system call and page pinning cost more
// than the second copy. Fitted to two machines, so a rough rule (CCL_CMA_MIN overrides it): an
// Intel Xeon VM (probe 0.8 us) where single copy won from 8-16 KiB, and an AMD EPYC one (1.9 us:
// every kernel entry is dear there) where it lost up to 256 KiB blocks. 16 KiB at 0.8 us, doubling
// with every 275 ns more (a power of two, 8 KiB to 512 KiB). That AMD VM later probed 1.2-1.3 us
// while its kernel still copied at a quarter of memcpy's speed: the per-byte probe
// (cma_copy_costs, cma_dear_bytes) catches what the fixed cost does not.
size_t cma_min_bytes(double probe_ns);

// The same where `local_ranks` share `cpus` (0: unknown): `cma_min`, but with more ranks than
// cpus at least 4 MiB over the ranks per cpu (2 MiB for 4 ranks on 2 cpus, 1 MiB for 8): the
// floor that dear_cma_min_bytes applies where the kernel's bytes are dear. (A crowded node has no
// single-copy allgathers, and all-to-all blocks single copy only below 4 or 8 MiB, either way:
// alltoall_cma_max_bytes.) Where they are dear (the 2-core AMD VM), on a crowded node the work is
// done one rank at a time, so what counts is the cpu time of a transfer, where the kernel's page
// pinning makes one copy dearer than two in cache; and a single-copy send waits for its receive to
// be posted, which a rank that is not running cannot do. The 2-core VM (a 1.2-1.3 us probe: 32-64
// KiB), medians of launches in one placement, us, with this / single copy from the probe's size: 4
// ranks, allgather 256 KiB 13 / 37, 2 MiB 91 / 252, 16 MiB 1696 / 3246; all-to-all 256 KiB 22-27 /
// 38-41, 16 MiB 2783 / 4018, 64 MiB 12307 / 16429; a sendrecv ring 256 KiB 21-28 / 37-50, 1 MiB 76
// / 143-149; 8 ranks, allgather 16 MiB 2463 / 7468, sendrecv 256 KiB 42 / 98. A ring of 4 MiB at 4
// ranks went faster single copy (620-824 against 1263), of 1 MiB at 8 ranks too (303-358 against
// 356-435): hence the bound falls with the ranks per cpu.
size_t crowded_cma_min_bytes(size_t cma_min, int local_ranks, int cpus);

// Where point-to-point messages go single copy where `local_ranks` share `cpus` (0: unknown):
// `cma_min`, but with more ranks than cpus at least 16 KiB per rank per cpu (32 KiB for 4 ranks on
// 2 cpus). A single-copy send waits for its receive to be posted, and on a crowded node that takes
// the receiver's turn on a cpu, which costs more than the data segment's second copy of a small
// message. The 2-core Xeon VM, sendrecv rings, alternating launches, medians, us, through the data
// segment / single copy: 3 ranks 16 KiB 5.3 / 9.4, 32 KiB 12.9 / 10.3; 4 ranks 16 KiB 6.8 / 12.0,
// 32 KiB 11.2 / 12.1, 64 KiB 20.3 / 15.7; 8 ranks 32 KiB 22.2 / 28.7, 64 KiB 48.0 / 34.4.
size_t crowded_p2p_cma_min_bytes(size_t cma_min, int local_ranks, int cpus);

// Where single copy starts, from the probed size (cma_min_bytes), a crowded node's floor
// (crowded_cma_min_bytes of 0; 0 where not crowded) and whether the kernel's bytes are dear
// (cma_dear_bytes). Cheap bytes: the probed size, crowded or not (the 2-core Xeon VM, 4 ranks,
// single copy from 16 KiB against from 2 MiB, us: a sendrecv ring of 256 KiB 40 / 85, 2 MiB
// 509 / 552; all-to-all 256 KiB 40 / 68, 2 MiB 421 / 489). Dear bytes: at least the crowded
// floor, else 4 MiB, where single copy still saves the arena's second pass over memory past the
// caches (the 2-core AMD VM, 2 ranks, a sendrecv ring: 8 MiB 899 / 981 us, 16 MiB 2136 / 2993,
// single copy / through the arena; 2 MiB 138 / 72); the crowded floor is lower because it was
// measured there: rings of 2 MiB at 4 ranks and of 1 MiB at 8 still went faster single copy.
size_t dear_cma_min_bytes(size_t probed, size_t crowd_floor, bool dear);

// Below what size all-to-all blocks go single copy (SIZE_MAX: any; 0: none) where the kernel's
// copies are `cheap` (a low bound, given, or probed with a cpu per rank and bytes not dear: single
// copy won at every size on the Xeon host), `dear` by the byte (cma_dear_bytes), on a `crowded`
// node (more ranks than cpus). Dear with a cpu per rank: none, the arena's pieces won from a
// piece up (the AMD VM, 2 ranks, 2 MiB: 60 us against 90 with the cpus near, 89 against 93 far
// apart). Else 4 MiB (the AMD VM, 2 ranks, 16 MiB: 1.1-1.2 ms through the arena against 1.3-1.5),
// or 8 MiB where only the crowd stands in the way: there each round of pieces waits for every
// rank's turn on a cpu, where single copy takes one round, and past the caches the arena's
// streaming copy-outs win (the 2-core Xeon VM, 4 ranks, medians, us, single copy / through the
// arena: 16 MiB, 4 MiB blocks, 3224 / 4262, Open MPI 3557; 32 MiB 11710 / 10212; 64 MiB 25650 /
// 22528).
size_t alltoall_cma_max_bytes(bool cheap, bool dear, bool crowded);

}  // namespace ccl::shm

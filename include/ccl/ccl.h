/*
 * ccl: collective communications for CPUs (and Intel XPUs), through one C ABI.
 *
 * This header is the whole public API. It is C11 and C++ clean. Every function returns a
 * ccl_result_t (never aborts, never throws); on failure ccl_last_error() holds a message that
 * describes this thread's last failure.
 *
 * Handles (ccl_kvs_t, ccl_comm_t, ccl_request_t) are opaque. A handle that is NULL, was already
 * destroyed, is of another type or is any other value that ccl did not return (a small integer, a
 * neighbour of a valid handle) is detected and refused with CCL_ERROR_INVALID_ARGUMENT: handle
 * values carry a per-process random key and a generation, and a made-up one passes only by chance
 * (about 2^-32).
 *
 * Thread safety:
 *   - ccl_get_version, ccl_strerror and ccl_last_error: any thread, any time.
 *   - A KVS handle may be shared between threads.
 *   - A communicator is used by one thread at a time (its collectives and its destruction);
 *     different communicators may be used at the same time from different threads. A call on a
 *     communicator (a collective, send, receive, nonblocking start, split, or the ccl_group_end
 *     that issues calls recorded on it) made while another thread is inside a call on the same
 *     communicator is refused with CCL_ERROR_INVALID_USAGE and does nothing (the communicator
 *     stays usable); the thread inside is not disturbed. Progress workers running requests, and
 *     the requests' own calls (below), are no such use. ccl_comm_abort,
 *     ccl_comm_get_async_error, ccl_comm_rank, ccl_comm_size, ccl_comm_shm_bytes,
 *     ccl_comm_nodes and ccl_comm_threads are the exceptions: any thread, any time before
 * ccl_comm_destroy. ccl_comm_destroy from another thread while a call is inside is deferred (see
 *     ccl_comm_destroy).
 *   - Communicators created over one KVS are told apart by their order of creation: create them in
 *     the same order on every rank, one at a time within a process.
 *   - A request is waited on, tested or freed by one thread at a time; different requests may be
 *     handled from different threads, and a request may be handled by a thread other than the one
 *     that started it.
 *   - Groups (ccl_group_start / ccl_group_end) belong to the calling thread.
 */
#ifndef CCL_CCL_H
#define CCL_CCL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CCL_API __attribute__((visibility("default")))
#else
#define CCL_API
#endif

/* In C++ the enums are based on int, so that any int a C caller passes is a valid value to check
 * (and refuse), not undefined behaviour. In C they are ints already. */
#ifdef __cplusplus
#define CCL_ENUM_BASE : int
#else
#define CCL_ENUM_BASE
#endif

#define CCL_VERSION_MAJOR 0
#define CCL_VERSION_MINOR 1
#define CCL_VERSION_PATCH 0

/* Results. CCL_SUCCESS is 0; everything else is a failure except CCL_IN_PROGRESS. */
typedef enum ccl_result_t CCL_ENUM_BASE {
    CCL_SUCCESS = 0,
    CCL_ERROR_INVALID_ARGUMENT = 1, /* a bad argument: NULL buffer, bad dtype/op/root, bad handle */
    CCL_ERROR_INVALID_USAGE = 2,    /* a valid call at the wrong time or in the wrong state */
    CCL_ERROR_TIMEOUT = 3,          /* a wait passed its deadline (CCL_TIMEOUT, CCL_KVS_TIMEOUT) */
    CCL_ERROR_PEER_FAILURE = 4,     /* a peer rank died or failed; the communicator is unusable */
    CCL_ERROR_SYSTEM = 5,           /* an operating-system call failed (message names it) */
    CCL_ERROR_OUT_OF_MEMORY = 6,    /* memory or shared memory could not be had */
    CCL_ERROR_UNSUPPORTED = 7,      /* not supported by this build or in this configuration */
    CCL_ERROR_INTERNAL = 8,         /* a bug in ccl: please report it with ccl_last_error() */
    CCL_IN_PROGRESS = 9,            /* a nonblocking operation has not completed yet */
    CCL_ERROR_ABORTED = 10          /* the communicator was aborted */
} ccl_result_t;

typedef enum ccl_datatype_t CCL_ENUM_BASE {
    CCL_INT8 = 0,
    CCL_UINT8 = 1,
    CCL_INT16 = 2,
    CCL_UINT16 = 3,
    CCL_INT32 = 4,
    CCL_UINT32 = 5,
    CCL_INT64 = 6,
    CCL_UINT64 = 7,
    CCL_FLOAT16 = 8,  /* IEEE 754 binary16 */
    CCL_BFLOAT16 = 9, /* bfloat16: the upper half of a float32 */
    CCL_FLOAT32 = 10,
    CCL_FLOAT64 = 11
} ccl_datatype_t;

/*
 * Reductions. Integer SUM and PROD wrap as two's complement. FLOAT16 and BFLOAT16 accumulate in
 * float32 and round once to nearest even. AVG is the SUM divided by the number of ranks (integer
 * types: truncated toward zero after the wrapping sum). MIN and MAX of NaN inputs are unspecified.
 */
typedef enum ccl_reduction_t CCL_ENUM_BASE {
    CCL_SUM = 0,
    CCL_PROD = 1,
    CCL_MIN = 2,
    CCL_MAX = 3,
    CCL_AVG = 4
} ccl_reduction_t;

typedef struct ccl_kvs_s* ccl_kvs_t;
typedef struct ccl_comm_s* ccl_comm_t;
typedef struct ccl_request_s* ccl_request_t;
typedef struct ccl_stream_s* ccl_stream_t;

/*
 * Per-call attributes. Always start from CCL_COLL_ATTR_INIT so that `size` is set: it lets later
 * versions of ccl add fields without breaking binaries built against this header.
 *   match_id     a name for this call site, used with to_cache (NULL: none)
 *   to_cache     keep the planned schedule under match_id and reuse it, in this and later calls
 *                that pass the same match_id (new buffer pointers are fine). Reusing a match_id
 *                for a different call (collective, count, datatype, reduction, root or
 *                communicator) fails with CCL_ERROR_INVALID_USAGE. The cache holds CCL_CACHE_SIZE
 *                schedules (least recently used go first); ccl_comm_destroy frees a
 *                communicator's entries.
 *   synchronous  complete the operation before returning, even when a request is asked for (the
 *                request is then already complete)
 *   priority     a hint for ordering nonblocking work of different communicators; work on one
 *                communicator always runs in issue order. Currently it has no effect.
 *   stream       (NULL: none) a Level Zero stream (ccl_stream_create_ze): the
 *                call's device copies go on it after the work submitted to it before, and the
 *                call waits for them, so the user's earlier device work is visible to the
 *                collective and its results to the work submitted after it returns. Only with
 *                blocking calls (req NULL, or synchronous set): a nonblocking call with a stream
 *                fails with CCL_ERROR_UNSUPPORTED. Binaries built before the field existed pass a
 *                smaller `size` and get no stream.
 */
typedef struct ccl_coll_attr_t {
    size_t size;
    const char* match_id;
    int to_cache;
    int synchronous;
    int priority;
    ccl_stream_t stream;
} ccl_coll_attr_t;

#define CCL_COLL_ATTR_INIT \
    { sizeof(ccl_coll_attr_t), NULL, 0, 0, 0, NULL }

/* Library information and errors. */
CCL_API ccl_result_t ccl_get_version(int* major, int* minor, int* patch);
CCL_API const char* ccl_strerror(ccl_result_t result);
/* This thread's last failure message ("" if none). Valid until this thread's next ccl call. */
CCL_API const char* ccl_last_error(void);

/*
 * The key-value store used to bootstrap communicators. One process creates the main KVS (it
 * serves it from a background thread); the others connect to its address, which the application
 * passes along (e.g. through its launcher or a file). Connecting retries until CCL_KVS_TIMEOUT.
 * The address, "a.b.c.d:port/<32 hex digits>", carries the job's secret (128 random bits drawn by
 * ccl_kvs_create_main): only a process that has it gets in, so pass it only to the job's ranks,
 * over a channel strangers cannot read. ccl_kvs_connect refuses an address without a secret
 * (CCL_ERROR_INVALID_ARGUMENT) and fails with CCL_ERROR_INVALID_USAGE when the server refuses
 * the secret (an address of another job). docs/reliability.md.
 */
#define CCL_KVS_ADDRESS_MAX 256
CCL_API ccl_result_t ccl_kvs_create_main(ccl_kvs_t* kvs);
/* Writes the address (at most CCL_KVS_ADDRESS_MAX bytes with its NUL) to buf. */
CCL_API ccl_result_t ccl_kvs_get_address(ccl_kvs_t kvs, char* buf, size_t len);
CCL_API ccl_result_t ccl_kvs_connect(const char* address, ccl_kvs_t* kvs);
/* Destroying the main KVS stops its server: destroy it after every rank has created its
 * communicators. */
CCL_API ccl_result_t ccl_kvs_destroy(ccl_kvs_t kvs);

/*
 * Communicators. Creation is collective: every rank of the communicator calls it, and ranks that
 * create several communicators over one KVS create them in the same order. The shared-memory
 * segments it makes lose their names in /dev/shm once every co-located rank has mapped them; a
 * rank killed before that leaves them to the next job's ccl_comm_create (or `ccl_info --clean`),
 * which removes segments whose creator is gone (docs/reliability.md).
 */
CCL_API ccl_result_t ccl_comm_create(int size, int rank, ccl_kvs_t kvs, ccl_comm_t* comm);
/*
 * Finds rank, size, local rank and the KVS from the launcher that started the process: cclrun,
 * MPICH's Hydra (PMI-1), Open MPI (PMIx), torchrun (rank 0 serves the KVS at MASTER_PORT + 1, or
 * CCL_KVS_PORT) or Slurm's srun (PMI-2 / PMIx); CCL_PROCESS_LAUNCHER forces one. With none of
 * their variables the process is a job of one rank (MPI's singleton). Partial or conflicting
 * launcher variables fail with CCL_ERROR_INVALID_USAGE naming them. See docs/launching.md. The
 * first call in a process sets up the job's KVS; later calls reuse it.
 */
CCL_API ccl_result_t ccl_comm_create_from_env(ccl_comm_t* comm);
CCL_API ccl_result_t ccl_comm_rank(ccl_comm_t comm, int* rank);
CCL_API ccl_result_t ccl_comm_size(ccl_comm_t comm, int* size);
/* This rank's share, in bytes, of the shared memory the communicator's co-located ranks map for
 * it: two buffers of CCL_SHM_BUFFER_SIZE per rank, 16 lanes of 8 KiB for small messages, flags and
 * point-to-point channels; fixed when the communicator is made (about 2.2 MiB per rank by
 * default where ranks have a cpu each; the buffers grow with the rank's team, up to 4 MiB each).
 * Point-to-point messages sent before their receive is posted are held in further segments, made as
 * needed and freed once received; they are not counted. */
CCL_API ccl_result_t ccl_comm_shm_bytes(ccl_comm_t comm, size_t* bytes);
/* How many nodes the communicator's ranks span (ranks on one node share memory; CCL_NODE_ID
 * overrides what a node is) and the transports it uses, e.g. "shm" or "shm+ofi(tcp;ofi_rxm)",
 * written NUL-terminated into `transports` (truncated to `size` bytes; NULL or 0: not written). */
CCL_API ccl_result_t ccl_comm_nodes(ccl_comm_t comm, int* nodes, char* transports, size_t size);
/* How many threads this rank moves a large collective's bytes on: its team (copies, reductions
 * and single-copy transfers split over them), CCL_RANK_THREADS, by default the cpus the rank may
 * run on within its share of the node's; 1 where it has none. Process-wide: set by the first
 * communicator a launch makes. */
CCL_API ccl_result_t ccl_comm_threads(ccl_comm_t comm, int* threads);
/*
 * Waits for the communicator's outstanding work (each part within its own deadline), forgets its
 * cached schedules and releases its shared memory, fabric resources and handle. Not collective.
 * From another thread while a call is inside the communicator (a watchdog that gave up on it),
 * it does not wait for that call: the handle is invalid at once (later calls with it fail with
 * CCL_ERROR_INVALID_ARGUMENT), destroy returns CCL_SUCCESS, and the communicator is released when
 * the call inside returns, with its own result (ccl_comm_abort first makes that prompt). May be
 * called at any point of the process's exit: from atexit handlers and static destructors,
 * whenever they were registered.
 */
CCL_API ccl_result_t ccl_comm_destroy(ccl_comm_t comm);

/*
 * Failure handling (NCCL's ncclCommAbort / ncclCommGetAsyncError).
 *
 * ccl_comm_abort may be called from any thread at any time, also while another thread is inside
 * a call on `comm` (e.g. from a watchdog that gave up on it). Every operation of this rank on
 * `comm` that is waiting, queued for a progress worker or issued later fails with
 * CCL_ERROR_ABORTED: blocking calls return it, requests complete with it (ccl_wait / ccl_test
 * report it), within a few milliseconds. Operations that completed before keep their result.
 * The peers' pending and later operations on this communicator fail with CCL_ERROR_PEER_FAILURE
 * (they learn it through shared memory, at once). The shared-memory names this rank still held
 * for the communicator are removed when it is destroyed. The handle stays valid: the
 * communicator must still be destroyed with ccl_comm_destroy (which then returns promptly; from
 * the aborting thread while the woken call is still returning, it leaves the release to that
 * call), and its requests freed. Aborting twice is harmless.
 */
CCL_API ccl_result_t ccl_comm_abort(ccl_comm_t comm);
/*
 * Sets *result to CCL_SUCCESS while `comm` is healthy, else to the error that broke it: a
 * failure a progress worker met running nonblocking work, a failed blocking call, an abort
 * (CCL_ERROR_ABORTED), or a failure another rank reported (CCL_ERROR_PEER_FAILURE, ...). Never
 * waits; any thread, any time. When *result is an error, ccl_last_error() describes it. Returns
 * CCL_SUCCESS unless its arguments are bad.
 */
CCL_API ccl_result_t ccl_comm_get_async_error(ccl_comm_t comm, ccl_result_t* result);

/*
 * Splits a communicator (MPI_Comm_split semantics). Collective over `comm`: every rank calls it.
 * Ranks passing the same `color` (>= 0) form a new communicator, ranked by `key` and then by their
 * rank in `comm`; a rank passing CCL_UNDEFINED gets *newcomm = NULL. The new communicator is
 * independent of its parent: both may be used, each from one thread at a time, and destroyed in
 * any order.
 */
#define CCL_UNDEFINED (-1)
CCL_API ccl_result_t ccl_comm_split(ccl_comm_t comm, int color, int key, ccl_comm_t* newcomm);

/*
 * Collectives. Every rank of the communicator calls the same collectives in the same order with
 * matching count, datatype, reduction and root. In place when send == recv. `attr` may be NULL.
 * Counts are refused (CCL_ERROR_INVALID_ARGUMENT, naming the argument) when no buffer can have
 * them: when a buffer of that many elements, or of all blocks of a v-collective's counts, would
 * not fit in the address space from where it starts. The same holds for send and receive.
 *
 * `req` NULL means blocking: the call returns when this rank's part is done. Non-NULL means
 * nonblocking: the call checks its arguments, stores a request in *req and returns at once; a
 * progress worker thread (CCL_WORKER_COUNT) runs the collective while the caller computes.
 * Buffers must stay untouched until the request completes. Collectives on one communicator,
 * blocking or not, run in the order they were issued. ccl_comm_destroy waits for the
 * communicator's outstanding work.
 *
 * After a collective fails with CCL_ERROR_TIMEOUT, CCL_ERROR_PEER_FAILURE or
 * CCL_ERROR_INVALID_USAGE (ranks disagreeing on a call), the communicator is broken: later
 * collectives on it fail with an error saying so; destroy it.
 */
CCL_API ccl_result_t ccl_allreduce(const void* send, void* recv, size_t count, ccl_datatype_t dtype,
                                   ccl_reduction_t op, ccl_comm_t comm, const ccl_coll_attr_t* attr,
                                   ccl_request_t* req);
CCL_API ccl_result_t ccl_broadcast(void* buf, size_t count, ccl_datatype_t dtype, int root,
                                   ccl_comm_t comm, const ccl_coll_attr_t* attr,
                                   ccl_request_t* req);
CCL_API ccl_result_t ccl_barrier(ccl_comm_t comm, ccl_request_t* req);

/* The reduction of every rank's `send` lands in `recv` at `root` only (recv may be NULL on the
 * other ranks). In place at the root when send == recv. */
CCL_API ccl_result_t ccl_reduce(const void* send, void* recv, size_t count, ccl_datatype_t dtype,
                                ccl_reduction_t op, int root, ccl_comm_t comm,
                                const ccl_coll_attr_t* attr, ccl_request_t* req);

/*
 * The gathers, reduce-scatter and all-to-alls place blocks in rank order: rank r's block starts
 * at element r * count of a buffer of size * count elements, or, for the v-variants, at the sum of
 * the counts of ranks 0 .. r-1 (blocks packed contiguously, no displacements). Count arrays have
 * one entry per rank and are copied before the call returns.
 *
 * In place: allgather(v) when send is this rank's own block of recv (recv + offset of this rank),
 * reduce_scatter when recv is this rank's own block of send, alltoall when send == recv. alltoallv
 * is never in place. Any other overlap of send and recv is refused.
 */
/* recv (size * sendcount elements) gets every rank's sendcount elements. */
CCL_API ccl_result_t ccl_allgather(const void* send, void* recv, size_t sendcount,
                                   ccl_datatype_t dtype, ccl_comm_t comm,
                                   const ccl_coll_attr_t* attr, ccl_request_t* req);
/* recv gets rank r's recvcounts[r] elements for every r; sendcount == recvcounts[this rank].
 * Every rank passes the same recvcounts. */
CCL_API ccl_result_t ccl_allgatherv(const void* send, size_t sendcount, void* recv,
                                    const size_t* recvcounts, ccl_datatype_t dtype, ccl_comm_t comm,
                                    const ccl_coll_attr_t* attr, ccl_request_t* req);
/* send holds size * recvcount elements; recv (recvcount elements) gets the reduction of block
 * `rank` of every rank's send. */
CCL_API ccl_result_t ccl_reduce_scatter(const void* send, void* recv, size_t recvcount,
                                        ccl_datatype_t dtype, ccl_reduction_t op, ccl_comm_t comm,
                                        const ccl_coll_attr_t* attr, ccl_request_t* req);
/* Block j of send (count elements) goes to rank j, landing as block `rank` of its recv. */
CCL_API ccl_result_t ccl_alltoall(const void* send, void* recv, size_t count, ccl_datatype_t dtype,
                                  ccl_comm_t comm, const ccl_coll_attr_t* attr, ccl_request_t* req);
/* Block j of send (sendcounts[j] elements) goes to rank j, landing as block `rank` of its recv;
 * recvcounts[j] must equal rank j's sendcounts[this rank] (a mismatch fails on every rank with
 * CCL_ERROR_INVALID_USAGE and breaks the communicator, like any disagreement between ranks). */
CCL_API ccl_result_t ccl_alltoallv(const void* send, const size_t* sendcounts, void* recv,
                                   const size_t* recvcounts, ccl_datatype_t dtype, ccl_comm_t comm,
                                   const ccl_coll_attr_t* attr, ccl_request_t* req);

/*
 * Point to point. Messages from one rank to another are matched in the order they were sent; the
 * receiver's count and datatype must match the sender's (else the receive fails with
 * CCL_ERROR_INVALID_USAGE, the message is dropped and, from a rank on another node, the receive's
 * buffer may have been written). A rank may send to itself.
 *
 * A send never depends on its receiver: it completes once the data is copied out of `buf` (into
 * shared memory that grows as needed), so exchanges and rings of blocking sends cannot deadlock.
 * However many messages to a peer are not yet received, a send does not wait for them: only
 * memory bounds them (a /dev/shm too full for one more fails its send at once with
 * CCL_ERROR_OUT_OF_MEMORY).
 * (A large send between ranks of one node may first wait a little, at most 20 ms, for its receive
 * to be posted, so that it can copy straight into the receive's buffer.)
 * Receives run in issue order with the communicator's collectives (a nonblocking receive that
 * waits delays the collectives issued after it); sends do not queue behind them.
 */
CCL_API ccl_result_t ccl_send(const void* buf, size_t count, ccl_datatype_t dtype, int peer,
                              ccl_comm_t comm, ccl_request_t* req);
CCL_API ccl_result_t ccl_recv(void* buf, size_t count, ccl_datatype_t dtype, int peer,
                              ccl_comm_t comm, ccl_request_t* req);

/*
 * Tagged messages, and receives from any rank. A message carries a tag, 0 to CCL_TAG_MAX
 * (ccl_send and ccl_recv are tag 0). ccl_recv_tagged takes the first message not yet received
 * from `peer` that carries `tag`; with peer CCL_ANY_SOURCE, the first such message from any rank
 * (among those that have arrived, any rank's may come first). Messages of one tag between two
 * ranks match in the order they were sent, whatever messages of other tags do: one that arrives
 * ahead of its receive waits, copied, for the receive of its tag. `source` (may be NULL) gets
 * the sender's rank once the receive completes; it must stay valid until then, like `buf`.
 * Count and datatype must agree as for ccl_recv. Across nodes only tag 0 from a named peer
 * (CCL_ERROR_UNSUPPORTED otherwise).
 */
#define CCL_ANY_SOURCE (-1)
#define CCL_TAG_MAX 16777215
CCL_API ccl_result_t ccl_send_tagged(const void* buf, size_t count, ccl_datatype_t dtype, int peer,
                                     int tag, ccl_comm_t comm, ccl_request_t* req);
CCL_API ccl_result_t ccl_recv_tagged(void* buf, size_t count, ccl_datatype_t dtype, int peer,
                                     int tag, int* source, ccl_comm_t comm, ccl_request_t* req);

/*
 * Requests. ccl_wait blocks until the collective completes and returns its result (its own error
 * if it failed, with ccl_last_error() describing it). ccl_test sets *done to 1 once complete (then
 * returns the collective's result, like ccl_wait) and to 0 before (returning CCL_SUCCESS). A
 * completed request may be waited on or tested again; it keeps its result until freed.
 * ccl_request_free releases the handle; freeing an incomplete request lets the collective complete
 * in the background, unobserved.
 * Progress: nonblocking collectives and sends advance in the background (progress workers). A
 * nonblocking receive holds up no peer, so it is not handed to a worker: it advances when it is
 * waited on or tested, and it completes before any later collective or receive on its
 * communicator starts.
 */
CCL_API ccl_result_t ccl_wait(ccl_request_t req);
CCL_API ccl_result_t ccl_test(ccl_request_t req, int* done);
CCL_API ccl_result_t ccl_request_free(ccl_request_t req);

/*
 * XPU (Level Zero) buffers and streams. docs/xpu.md.
 *
 * Any buffer of any collective or point-to-point call may be Level Zero device, host or shared
 * memory (from zeMemAlloc*, or SYCL USM underneath), mixed freely with plain host memory: ccl asks
 * Level Zero what each pointer is. Device buffers are copied through host memory by Level Zero copy
 * command lists (CCL_ZE_IPC: some collectives copy between co-located ranks' device buffers
 * directly). Without a stream a call on device buffers is complete, device copies included, when
 * it returns or its request completes. ccl loads Level Zero at run time (CCL_ZE_LIBRARY_PATH);
 * without it, or when no driver initializes, device buffers are refused with
 * CCL_ERROR_INVALID_ARGUMENT where ccl can tell (docs/xpu.md) and host buffers work as always.
 * Device buffers inside ccl_group_start / ccl_group_end fail with CCL_ERROR_UNSUPPORTED.
 *
 * A stream wraps a native Level Zero object of the application, which keeps it alive (and owns
 * it) until after ccl_stream_destroy:
 *   CCL_STREAM_ZE_IMMEDIATE_COMMAND_LIST  `handle` is a ze_command_list_handle_t created with
 *                                         zeCommandListCreateImmediate
 *   CCL_STREAM_ZE_COMMAND_QUEUE           `handle` is a ze_command_queue_handle_t of queue group
 *                                         ordinal 0; ccl executes its own command lists on it
 * `context` (ze_context_handle_t) and `device` (ze_device_handle_t) are those the object was
 * created with. A stream is used by one thread at a time. Fails with CCL_ERROR_UNSUPPORTED when
 * Level Zero is off.
 */
typedef enum ccl_stream_type_t CCL_ENUM_BASE {
    CCL_STREAM_ZE_IMMEDIATE_COMMAND_LIST = 0,
    CCL_STREAM_ZE_COMMAND_QUEUE = 1
} ccl_stream_type_t;
CCL_API ccl_result_t ccl_stream_create_ze(ccl_stream_type_t type, void* context, void* device,
                                          void* handle, ccl_stream_t* stream);
CCL_API ccl_result_t ccl_stream_destroy(ccl_stream_t stream);

/*
 * Groups (NCCL semantics): collectives called between ccl_group_start and the matching
 * ccl_group_end are only recorded (their arguments checked); ccl_group_end issues them as one unit,
 * fusing consecutive small allreduces on one communicator into one step. Blocking collectives in a
 * group have completed when ccl_group_end returns (which reports the first failure); nonblocking
 * ones get their requests at once and complete through them. Their buffers must stay valid until
 * then. Groups nest: only the outermost ccl_group_end issues. Groups belong to the calling thread.
 */
CCL_API ccl_result_t ccl_group_start(void);
CCL_API ccl_result_t ccl_group_end(void);

#ifdef __cplusplus
}
#endif

#endif /* CCL_CCL_H */

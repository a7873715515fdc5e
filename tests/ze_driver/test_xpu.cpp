// Every collective on Level Zero device buffers (and host / shared ones, mixed with plain host
// memory), in place and out of place, through the test driver; streams; the IPC cache. Results
// are read back with device copies and checked against tests/ranks/reference.h.
#include <atomic>
#include <chrono>
#include <thread>

#include "common.h"
#include "reference.h"
#include "ze_helpers.h"

namespace test {
namespace {

constexpr ccl_datatype_t kT = CCL_FLOAT32;
constexpr size_t kEs = 4;

class Xpu : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_TRUE(ze().ok) << "the test driver did not initialize"; }
};

std::vector<size_t> counts_to_test() { return {1, 1000, large_count(kT)}; }

std::string what(const char* coll, size_t count, Mem s, Mem r, bool in_place) {
    return std::string(coll) + " count " + std::to_string(count) + " " +
           (in_place ? "in place on " + std::string(mem_name(r))
                     : std::string(mem_name(s)) + " -> " + mem_name(r));
}

TEST_F(Xpu, DeviceMemoryIsNotHostReadable) {
    // Otherwise a missed staging step in ccl would go unnoticed.
    Buf d(Mem::device, 4096);
    EXPECT_FALSE(host_readable(d.data()));
    Buf h(Mem::host, 4096);
    EXPECT_TRUE(host_readable(h.data()));
}

TEST_F(Xpu, Allreduce) {
    const std::pair<Mem, Mem> kinds[] = {{Mem::device, Mem::device},
                                         {Mem::plain, Mem::device},
                                         {Mem::device, Mem::plain},
                                         {Mem::shared, Mem::device},
                                         {Mem::device, Mem::host}};
    uint64_t seed = 1;
    for (size_t count : counts_to_test())
        for (ccl_reduction_t op : {CCL_SUM, CCL_MAX}) {
            for (auto [sk, rk] : kinds) {
                std::vector<char> in(count * kEs);
                fill(in.data(), count, kT, g_rank, ++seed, op);
                Buf s(sk, in.size()), r(rk, in.size());
                s.write(in.data(), in.size());
                CCL_OK(ccl_allreduce(s.data(), r.data(), count, kT, op, g_comm, nullptr, nullptr));
                check_reduced(r.read(in.size()).data(), count, kT, op, seed, g_size, 0,
                              what("allreduce", count, sk, rk, false));
                // The send buffer is untouched.
                EXPECT_EQ(s.read(in.size()), in);
            }
            std::vector<char> in(count * kEs);
            fill(in.data(), count, kT, g_rank, ++seed, op);
            Buf b(Mem::device, in.size());
            b.write(in.data(), in.size());
            CCL_OK(ccl_allreduce(b.data(), b.data(), count, kT, op, g_comm, nullptr, nullptr));
            check_reduced(b.read(in.size()).data(), count, kT, op, seed, g_size, 0,
                          what("allreduce", count, Mem::device, Mem::device, true));
        }
}

TEST_F(Xpu, AllreduceEveryType) {
    uint64_t seed = 100;
    for (ccl_datatype_t t : kTypes) {
        const size_t count = 77, bytes = count * type_size(t);
        std::vector<char> in(bytes);
        fill(in.data(), count, t, g_rank, ++seed, CCL_SUM);
        Buf s(Mem::device, bytes), r(Mem::device, bytes);
        s.write(in.data(), bytes);
        CCL_OK(ccl_allreduce(s.data(), r.data(), count, t, CCL_SUM, g_comm, nullptr, nullptr));
        check_reduced(r.read(bytes).data(), count, t, CCL_SUM, seed, g_size, 0, "every type");
    }
}

TEST_F(Xpu, Broadcast) {
    uint64_t seed = 200;
    for (size_t count : counts_to_test())
        for (int root : {0, g_size - 1}) {
            for (Mem k : {Mem::device, Mem::shared}) {
                std::vector<char> in(count * kEs, 0);
                ++seed;
                if (g_rank == root) fill(in.data(), count, kT, root, seed);
                Buf b(k, in.size());
                b.write(in.data(), in.size());
                CCL_OK(ccl_broadcast(b.data(), count, kT, root, g_comm, nullptr, nullptr));
                check_block(b.read(in.size()).data(), count, kT, root, seed, 0,
                            what("broadcast", count, k, k, true));
            }
        }
}

TEST_F(Xpu, Reduce) {
    uint64_t seed = 300;
    const int root = g_size - 1;
    for (size_t count : counts_to_test())
        for (bool in_place : {false, true}) {
            std::vector<char> in(count * kEs);
            fill(in.data(), count, kT, g_rank, ++seed, CCL_SUM);
            Buf s(Mem::device, in.size()), r(Mem::device, in.size());
            s.write(in.data(), in.size());
            void* recv = in_place ? s.data() : (g_rank == root ? r.data() : nullptr);
            CCL_OK(ccl_reduce(s.data(), recv, count, kT, CCL_SUM, root, g_comm, nullptr, nullptr));
            if (g_rank == root)
                check_reduced((in_place ? s : r).read(in.size()).data(), count, kT, CCL_SUM, seed,
                              g_size, 0, what("reduce", count, Mem::device, Mem::device, in_place));
        }
}

TEST_F(Xpu, Allgather) {
    uint64_t seed = 400;
    const std::pair<Mem, Mem> kinds[] = {
        {Mem::device, Mem::device}, {Mem::plain, Mem::device}, {Mem::device, Mem::plain}};
    for (size_t count : counts_to_test()) {
        const size_t bytes = count * kEs, total = bytes * size_t(g_size);
        for (auto [sk, rk] : kinds) {
            std::vector<char> in(bytes);
            fill(in.data(), count, kT, g_rank, ++seed);
            Buf s(sk, bytes), r(rk, total);
            s.write(in.data(), bytes);
            CCL_OK(ccl_allgather(s.data(), r.data(), count, kT, g_comm, nullptr, nullptr));
            std::vector<char> got = r.read(total);
            for (int q = 0; q < g_size; ++q)
                check_block(got.data() + size_t(q) * bytes, count, kT, q, seed, 0,
                            what("allgather", count, sk, rk, false));
        }
        // In place: this rank's block of recv holds its input.
        std::vector<char> in(bytes);
        fill(in.data(), count, kT, g_rank, ++seed);
        Buf r(Mem::device, total);
        r.write(in.data(), bytes, size_t(g_rank) * bytes);
        CCL_OK(ccl_allgather(r.data() + size_t(g_rank) * bytes, r.data(), count, kT, g_comm,
                             nullptr, nullptr));
        std::vector<char> got = r.read(total);
        for (int q = 0; q < g_size; ++q)
            check_block(got.data() + size_t(q) * bytes, count, kT, q, seed, 0,
                        what("allgather", count, Mem::device, Mem::device, true));
    }
}

TEST_F(Xpu, Allgatherv) {
    uint64_t seed = 500;
    for (size_t base : {size_t(0), size_t(1), size_t(3000)})
        for (bool in_place : {false, true}) {
            std::vector<size_t> counts(static_cast<size_t>(g_size)),
                offsets(static_cast<size_t>(g_size));
            size_t total = 0;
            for (int q = 0; q < g_size; ++q) {
                counts[size_t(q)] = base * size_t(q + 1) + size_t(q % 2);
                offsets[size_t(q)] = total;
                total += counts[size_t(q)];
            }
            const size_t mine = counts[size_t(g_rank)], off = offsets[size_t(g_rank)] * kEs;
            std::vector<char> in(mine * kEs + 1);
            fill(in.data(), mine, kT, g_rank, ++seed);
            Buf s(Mem::device, mine * kEs), r(Mem::device, total * kEs);
            const void* send = s.data();
            if (in_place) {
                if (mine) r.write(in.data(), mine * kEs, off);
                send = r.data() + off;
            } else if (mine) {
                s.write(in.data(), mine * kEs);
            }
            CCL_OK(
                ccl_allgatherv(send, mine, r.data(), counts.data(), kT, g_comm, nullptr, nullptr));
            std::vector<char> got = r.read(total * kEs);
            for (int q = 0; q < g_size; ++q)
                check_block(got.data() + offsets[size_t(q)] * kEs, counts[size_t(q)], kT, q, seed,
                            0, what("allgatherv", total, Mem::device, Mem::device, in_place));
        }
}

TEST_F(Xpu, ReduceScatter) {
    uint64_t seed = 600;
    for (size_t count : counts_to_test())
        for (bool in_place : {false, true}) {
            const size_t bytes = count * kEs, total = bytes * size_t(g_size);
            std::vector<char> in(total);
            fill(in.data(), count * size_t(g_size), kT, g_rank, ++seed);
            Buf s(Mem::device, total), r(Mem::device, bytes);
            s.write(in.data(), total);
            void* recv = in_place ? s.data() + size_t(g_rank) * bytes : r.data();
            CCL_OK(
                ccl_reduce_scatter(s.data(), recv, count, kT, CCL_SUM, g_comm, nullptr, nullptr));
            std::vector<char> got =
                in_place ? s.read(bytes, size_t(g_rank) * bytes) : r.read(bytes);
            check_reduced(got.data(), count, kT, CCL_SUM, seed, g_size, size_t(g_rank) * count,
                          what("reduce_scatter", count, Mem::device, Mem::device, in_place));
        }
}

// Rank q's input for rank j's block (index base j * count): what alltoall must deliver.
TEST_F(Xpu, Alltoall) {
    uint64_t seed = 700;
    for (size_t count : {size_t(1), size_t(1000), size_t(20000)})
        for (bool in_place : {false, true}) {
            const size_t bytes = count * kEs, total = bytes * size_t(g_size);
            std::vector<char> in(total);
            fill(in.data(), count * size_t(g_size), kT, g_rank, ++seed);
            Buf s(Mem::device, total), r(Mem::device, total);
            s.write(in.data(), total);
            void* recv = in_place ? s.data() : r.data();
            CCL_OK(ccl_alltoall(s.data(), recv, count, kT, g_comm, nullptr, nullptr));
            std::vector<char> got = (in_place ? s : r).read(total);
            for (int q = 0; q < g_size; ++q)
                check_block(got.data() + size_t(q) * bytes, count, kT, q, seed,
                            size_t(g_rank) * count,
                            what("alltoall", count, Mem::device, Mem::device, in_place));
        }
}

TEST_F(Xpu, Alltoallv) {
    uint64_t seed = 800;
    // Rank q sends (q + j) % 3 * base + 1 elements to rank j.
    const size_t base = 700;
    auto n_of = [&](int q, int j) { return size_t((q + j) % 3) * base + 1; };
    std::vector<size_t> sc(static_cast<size_t>(g_size)), rc(static_cast<size_t>(g_size));
    size_t st = 0, rt = 0;
    for (int j = 0; j < g_size; ++j) {
        sc[size_t(j)] = n_of(g_rank, j);
        rc[size_t(j)] = n_of(j, g_rank);
        st += sc[size_t(j)];
        rt += rc[size_t(j)];
    }
    // Block j of this rank's send holds elements from index j * 10000 of its sequence.
    std::vector<char> in(st * kEs);
    size_t o = 0;
    ++seed;
    for (int j = 0; j < g_size; ++j) {
        fill(in.data() + o * kEs, sc[size_t(j)], kT, g_rank, seed, CCL_SUM, size_t(j) * 10000);
        o += sc[size_t(j)];
    }
    Buf s(Mem::device, st * kEs), r(Mem::device, rt * kEs);
    s.write(in.data(), in.size());
    CCL_OK(ccl_alltoallv(s.data(), sc.data(), r.data(), rc.data(), kT, g_comm, nullptr, nullptr));
    std::vector<char> got = r.read(rt * kEs);
    o = 0;
    for (int q = 0; q < g_size; ++q) {
        check_block(got.data() + o * kEs, rc[size_t(q)], kT, q, seed, size_t(g_rank) * 10000,
                    "alltoallv device -> device");
        o += rc[size_t(q)];
    }
}

TEST_F(Xpu, SendRecvRing) {
    uint64_t seed = 900;
    const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
    for (size_t count : {size_t(5), size_t(50000)}) {
        std::vector<char> in(count * kEs);
        fill(in.data(), count, kT, g_rank, ++seed);
        Buf s(Mem::device, in.size()), r(Mem::device, in.size());
        s.write(in.data(), in.size());
        CCL_OK(ccl_send(s.data(), count, kT, next, g_comm, nullptr));
        CCL_OK(ccl_recv(r.data(), count, kT, prev, g_comm, nullptr));
        check_block(r.read(in.size()).data(), count, kT, prev, seed, 0, "send/recv ring");
    }
}

TEST_F(Xpu, Nonblocking) {
    uint64_t seed = 1000;
    const size_t count = large_count(kT);
    std::vector<char> in(count * kEs);
    fill(in.data(), count, kT, g_rank, ++seed);
    Buf s(Mem::device, in.size()), r(Mem::device, in.size()), g(Mem::device, in.size() * g_size);
    s.write(in.data(), in.size());
    ccl_request_t a = nullptr, b = nullptr;
    CCL_OK(ccl_allreduce(s.data(), r.data(), count, kT, CCL_SUM, g_comm, nullptr, &a));
    CCL_OK(ccl_allgather(s.data(), g.data(), count, kT, g_comm, nullptr, &b));
    CCL_OK(ccl_wait(b));
    CCL_OK(ccl_wait(a));
    CCL_OK(ccl_request_free(a));
    CCL_OK(ccl_request_free(b));
    check_reduced(r.read(in.size()).data(), count, kT, CCL_SUM, seed, g_size, 0,
                  "nonblocking allreduce");
    std::vector<char> got = g.read(in.size() * g_size);
    for (int q = 0; q < g_size; ++q)
        check_block(got.data() + size_t(q) * in.size(), count, kT, q, seed, 0,
                    "nonblocking allgather");
}

// A user's immediate list holds a copy into the buffer that waits for an event signalled later:
// a collective on that stream must see the copied data, and its own copies must be done when it
// returns. Without stream ordering it reads the buffer before the user's copy.
TEST_F(Xpu, StreamOrdersWithUserWork) {
    ZeEnv& e = ze();
    ze_command_queue_desc_t qd{
        ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, 0, 0, 0, ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
        ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
    ze_command_list_handle_t list = nullptr;
    ZE_OK(zeCommandListCreateImmediate(e.context, e.device, &qd, &list));
    ze_event_pool_desc_t pd{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr,
                            ZE_EVENT_POOL_FLAG_HOST_VISIBLE, 1};
    ze_event_pool_handle_t pool = nullptr;
    ZE_OK(zeEventPoolCreate(e.context, &pd, 0, nullptr, &pool));
    ze_event_desc_t ed{ZE_STRUCTURE_TYPE_EVENT_DESC, nullptr, 0, ZE_EVENT_SCOPE_FLAG_HOST,
                       ZE_EVENT_SCOPE_FLAG_HOST};
    ze_event_handle_t gate = nullptr;
    ZE_OK(zeEventCreate(pool, &ed, &gate));
    ccl_stream_t stream = nullptr;
    CCL_OK(ccl_stream_create_ze(CCL_STREAM_ZE_IMMEDIATE_COMMAND_LIST, e.context, e.device, list,
                                &stream));

    const size_t count = 30000;  // above CCL_ZE_PIPELINE_CHUNK in the tests: chunk by chunk
    const uint64_t seed = 1100;
    std::vector<char> in(count * kEs), zeros(count * kEs, 0);
    fill(in.data(), count, kT, g_rank, seed);
    Buf b(Mem::device, in.size());
    b.write(zeros.data(), zeros.size());
    ZE_OK(zeCommandListAppendWaitOnEvents(list, 1, &gate));
    ZE_OK(zeCommandListAppendMemoryCopy(list, b.data(), in.data(), in.size(), nullptr, 0, nullptr));
    std::thread opener([gate] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        zeEventHostSignal(gate);
    });
    ccl_coll_attr_t attr = CCL_COLL_ATTR_INIT;
    attr.stream = stream;
    ccl_result_t res =
        ccl_allreduce(b.data(), b.data(), count, kT, CCL_SUM, g_comm, &attr, nullptr);
    opener.join();
    EXPECT_EQ(res, CCL_SUCCESS) << ccl_last_error();
    check_reduced(b.read(in.size()).data(), count, kT, CCL_SUM, seed, g_size, 0,
                  "allreduce on a stream");
    // A nonblocking call cannot take a stream.
    ccl_request_t req = nullptr;
    EXPECT_FAILS(ccl_allreduce(b.data(), b.data(), count, kT, CCL_SUM, g_comm, &attr, &req),
                 CCL_ERROR_UNSUPPORTED, "stream");
    CCL_OK(ccl_stream_destroy(stream));
    EXPECT_FAILS(ccl_stream_destroy(stream), CCL_ERROR_INVALID_ARGUMENT, "stream");
    zeEventDestroy(gate);
    zeEventPoolDestroy(pool);
    zeCommandListDestroy(list);
}

// The same through a command queue: ccl's copies execute on it after the user's lists.
TEST_F(Xpu, StreamOnCommandQueue) {
    ZeEnv& e = ze();
    ze_command_queue_desc_t qd{
        ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, 0, 0, 0, ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
        ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
    ze_command_queue_handle_t queue = nullptr;
    ZE_OK(zeCommandQueueCreate(e.context, e.device, &qd, &queue));
    ze_command_list_desc_t ld{ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC, nullptr, 0, 0};
    ze_command_list_handle_t user = nullptr;
    ZE_OK(zeCommandListCreate(e.context, e.device, &ld, &user));
    ze_event_pool_desc_t pd{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr,
                            ZE_EVENT_POOL_FLAG_HOST_VISIBLE, 1};
    ze_event_pool_handle_t pool = nullptr;
    ZE_OK(zeEventPoolCreate(e.context, &pd, 0, nullptr, &pool));
    ze_event_desc_t ed{ZE_STRUCTURE_TYPE_EVENT_DESC, nullptr, 0, ZE_EVENT_SCOPE_FLAG_HOST,
                       ZE_EVENT_SCOPE_FLAG_HOST};
    ze_event_handle_t gate = nullptr;
    ZE_OK(zeEventCreate(pool, &ed, &gate));
    ccl_stream_t stream = nullptr;
    CCL_OK(ccl_stream_create_ze(CCL_STREAM_ZE_COMMAND_QUEUE, e.context, e.device, queue, &stream));

    const size_t count = 2000;
    const uint64_t seed = 1200;
    std::vector<char> in(count * kEs), zeros(count * kEs, 0);
    fill(in.data(), count, kT, g_rank, seed);
    Buf s(Mem::device, in.size()), r(Mem::device, in.size());
    s.write(zeros.data(), zeros.size());
    ZE_OK(zeCommandListAppendWaitOnEvents(user, 1, &gate));
    ZE_OK(zeCommandListAppendMemoryCopy(user, s.data(), in.data(), in.size(), nullptr, 0, nullptr));
    ZE_OK(zeCommandListClose(user));
    ZE_OK(zeCommandQueueExecuteCommandLists(queue, 1, &user, nullptr));
    std::thread opener([gate] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        zeEventHostSignal(gate);
    });
    ccl_coll_attr_t attr = CCL_COLL_ATTR_INIT;
    attr.stream = stream;
    ccl_result_t res =
        ccl_allreduce(s.data(), r.data(), count, kT, CCL_SUM, g_comm, &attr, nullptr);
    opener.join();
    EXPECT_EQ(res, CCL_SUCCESS) << ccl_last_error();
    check_reduced(r.read(in.size()).data(), count, kT, CCL_SUM, seed, g_size, 0,
                  "allreduce on a queue stream");
    ZE_OK(zeCommandQueueSynchronize(queue, UINT64_MAX));
    CCL_OK(ccl_stream_destroy(stream));
    zeEventDestroy(gate);
    zeEventPoolDestroy(pool);
    zeCommandListDestroy(user);
    zeCommandQueueDestroy(queue);
}

// Attributes of binaries built before the stream field: a smaller size, no stream.
TEST_F(Xpu, OldAttributeSize) {
    ccl_coll_attr_t attr = CCL_COLL_ATTR_INIT;
    attr.size = offsetof(ccl_coll_attr_t, stream);
    attr.stream = reinterpret_cast<ccl_stream_t>(uintptr_t(0xdead));  // never read
    const size_t count = 10;
    std::vector<char> in(count * kEs);
    fill(in.data(), count, kT, g_rank, 1300);
    Buf b(Mem::device, in.size());
    b.write(in.data(), in.size());
    CCL_OK(ccl_allreduce(b.data(), b.data(), count, kT, CCL_SUM, g_comm, &attr, nullptr));
    check_reduced(b.read(in.size()).data(), count, kT, CCL_SUM, 1300, g_size, 0, "old attr");
}

TEST_F(Xpu, GroupsRefuseDeviceBuffers) {
    Buf b(Mem::device, 64);
    CCL_OK(ccl_group_start());
    EXPECT_FAILS(ccl_allreduce(b.data(), b.data(), 4, kT, CCL_SUM, g_comm, nullptr, nullptr),
                 CCL_ERROR_UNSUPPORTED, "group");
    CCL_OK(ccl_group_end());
    expect_comm_still_works();
}

// The peers free their buffer and allocate one of the same size again (the driver reuses the
// address, like a caching allocator): every call must see the new memory's contents.
TEST_F(Xpu, ReallocatedBuffersAreNeverStale) {
    const size_t count = 4096;
    char* first = nullptr;
    for (int round = 0; round < 4; ++round) {
        const uint64_t seed = 1400 + uint64_t(round);
        std::vector<char> in(count * kEs);
        fill(in.data(), count, kT, g_rank, seed);
        Buf r(Mem::device, in.size() * g_size);
        // The premise: the same address, new memory.
        if (round == 0) first = r.data();
        EXPECT_EQ(r.data(), first) << "the driver did not reuse the address";
        r.write(in.data(), in.size(), size_t(g_rank) * in.size());
        CCL_OK(ccl_allgather(r.data() + size_t(g_rank) * in.size(), r.data(), count, kT, g_comm,
                             nullptr, nullptr));
        std::vector<char> got = r.read(in.size() * g_size);
        for (int q = 0; q < g_size; ++q)
            check_block(got.data() + size_t(q) * in.size(), count, kT, q, seed, 0,
                        "allgather after reallocation, round " + std::to_string(round));
        Buf b(Mem::device, in.size());
        std::vector<char> root_in(in.size(), 0);
        if (g_rank == 0) fill(root_in.data(), count, kT, 0, seed + 50);
        b.write(root_in.data(), root_in.size());
        CCL_OK(ccl_broadcast(b.data(), count, kT, 0, g_comm, nullptr, nullptr));
        check_block(b.read(in.size()).data(), count, kT, 0, seed + 50, 0,
                    "broadcast after reallocation, round " + std::to_string(round));
    }
}

// Device buffers on some ranks, plain host memory on the others, small and pipelined sizes.
TEST_F(Xpu, DeviceOnSomeRanksHostOnOthers) {
    uint64_t seed = 1500;
    const Mem mine = g_rank % 2 ? Mem::plain : Mem::device;
    for (size_t count : counts_to_test()) {
        std::vector<char> in(count * kEs);
        fill(in.data(), count, kT, g_rank, ++seed);
        Buf s(mine, in.size()), r(mine, in.size());
        s.write(in.data(), in.size());
        CCL_OK(ccl_allreduce(s.data(), r.data(), count, kT, CCL_SUM, g_comm, nullptr, nullptr));
        check_reduced(r.read(in.size()).data(), count, kT, CCL_SUM, seed, g_size, 0,
                      what("allreduce, device and host ranks", count, mine, mine, false));
        const int root = g_size - 1;
        std::vector<char> b_in(in.size(), 0);
        ++seed;
        if (g_rank == root) fill(b_in.data(), count, kT, root, seed);
        Buf b(mine, in.size());
        b.write(b_in.data(), b_in.size());
        CCL_OK(ccl_broadcast(b.data(), count, kT, root, g_comm, nullptr, nullptr));
        check_block(b.read(in.size()).data(), count, kT, root, seed, 0,
                    what("broadcast, device and host ranks", count, mine, mine, true));
    }
}

TEST_F(Xpu, HostBuffersStillWork) { expect_comm_still_works(); }

}  // namespace
}  // namespace test

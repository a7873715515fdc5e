// oneCCL's C++ API over ccl (include/oneapi/ccl.hpp), at any number of ranks under cclrun: every
// collective and datatype, in place and out of place, waited on at once and left running while
// others start, against references computed here from every rank's known input; the match_id
// cache, split communicators, point to point, groups, dependencies, registered datatypes; and the
// parts ccl refuses, each an exception that says why.
//
// A plain program in C++11 (the oldest standard the header supports; CMake also compiles it as
// C++14, 17 and 20): a failed check prints the rank and what failed and exits 1.
#include <oneapi/ccl.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_rank = 0;
int g_checks = 0;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        ++g_checks;                                                                                \
        if (!(cond)) {                                                                             \
            std::fprintf(stderr, "rank %d: %s:%d: CHECK(%s) failed: ", g_rank, __FILE__, __LINE__, \
                         #cond);                                                                   \
            std::fprintf(stderr, __VA_ARGS__);                                                     \
            std::fprintf(stderr, "\n");                                                            \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)

// The exception a refused call throws: its class and words of its message.
template <class Exception, class F>
void expect_throw(F f, const char* word, const char* what) {
    try {
        f();
    } catch (const Exception& e) {
        const std::string msg = e.what();
        CHECK(msg.find("ccl: ") == 0 && msg.find(word) != std::string::npos,
              "%s: message '%s' does not say '%s'", what, msg.c_str(), word);
        return;
    } catch (const std::exception& e) {
        CHECK(false, "%s: threw another exception: %s", what, e.what());
    }
    CHECK(false, "%s: did not throw", what);
}

/* ---- Element types and their exact values ---- */

// Small integers, exact in every datatype (binary16 and bfloat16 included) and in any order of
// summation. Products use values in {1, 2} (and -1 for signed types): at most 2^ranks.
bool g_prod = false;

template <class T>
struct elem;

#define PLAIN_ELEM(T, is_signed)                                    \
    template <>                                                     \
    struct elem<T> {                                                \
        static const bool signed_ = is_signed;                      \
        static T make(double v) { return static_cast<T>(v); }       \
        static double value(T v) { return static_cast<double>(v); } \
    };
PLAIN_ELEM(int8_t, true)
PLAIN_ELEM(uint8_t, false)
PLAIN_ELEM(int16_t, true)
PLAIN_ELEM(uint16_t, false)
PLAIN_ELEM(int32_t, true)
PLAIN_ELEM(uint32_t, false)
PLAIN_ELEM(int64_t, true)
PLAIN_ELEM(uint64_t, false)
PLAIN_ELEM(float, true)
PLAIN_ELEM(double, true)

uint32_t float_bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}
float bits_float(uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}

template <>
struct elem<ccl::bfloat16> {
    static const bool signed_ = true;
    static ccl::bfloat16 make(double v) {
        return ccl::bfloat16(static_cast<uint16_t>(float_bits(static_cast<float>(v)) >> 16));
    }
    static double value(ccl::bfloat16 v) { return bits_float(uint32_t(v.get_data()) << 16); }
};

// IEEE binary16 of small integers (exact: no rounding needed).
template <>
struct elem<ccl::float16> {
    static const bool signed_ = true;
    static ccl::float16 make(double v) {
        if (v == 0) return ccl::float16(0);
        const uint32_t b = float_bits(static_cast<float>(v));
        const uint32_t sign = (b >> 16) & 0x8000u;
        const uint32_t exp = ((b >> 23) & 0xffu) - 127u + 15u;
        const uint32_t mant = (b >> 13) & 0x3ffu;
        return ccl::float16(static_cast<uint16_t>(sign | (exp << 10) | mant));
    }
    static double value(ccl::float16 h) {
        const uint32_t v = h.get_data();
        if ((v & 0x7fffu) == 0) return 0;
        const uint32_t sign = (v & 0x8000u) << 16;
        const uint32_t exp = ((v >> 10) & 0x1fu) - 15u + 127u;
        const uint32_t mant = (v & 0x3ffu) << 13;
        return bits_float(sign | (exp << 23) | mant);
    }
};

template <class T>
double input(int rank, size_t i) {
    if (g_prod) {
        const int m = static_cast<int>((i + rank) % 3);
        return m == 0 ? (elem<T>::signed_ ? -1 : 1) : m;
    }
    return static_cast<double>((i * (rank + 1) + 3 * rank) % 7) - (elem<T>::signed_ ? 3 : 0);
}

template <class T>
std::vector<T> inputs(int rank, size_t n, size_t offset = 0) {
    std::vector<T> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = elem<T>::make(input<T>(rank, i + offset));
    return v;
}

double reduced(ccl::reduction op, int ranks, size_t i, double (*in)(int, size_t)) {
    double r = in(0, i);
    for (int k = 1; k < ranks; ++k) {
        const double x = in(k, i);
        switch (op) {
            case ccl::reduction::sum: r += x; break;
            case ccl::reduction::prod: r *= x; break;
            case ccl::reduction::min: r = x < r ? x : r; break;
            case ccl::reduction::max: r = x > r ? x : r; break;
            default: std::abort();
        }
    }
    return r;
}

template <class T>
void expect_values(const T* got, size_t n, const char* what, double (*want)(size_t)) {
    for (size_t i = 0; i < n; ++i) {
        const double g = elem<T>::value(got[i]), w = want(i);
        CHECK(g == w, "%s: element %zu is %g, expected %g", what, i, g, w);
    }
}

/* ---- The collectives, for one element type ---- */

const size_t kCounts[] = {0, 1, 7, 1000, 70000};  // 70000: several shared-memory chunks
const ccl::reduction kOps[] = {ccl::reduction::sum, ccl::reduction::prod, ccl::reduction::min,
                               ccl::reduction::max};

// The reference for element i of a reduction over all ranks (a plain function pointer: C++11).
template <class T>
struct ref {
    static int ranks;
    static ccl::reduction op;
    static size_t offset;
    static int root;  // broadcast: whose input
    static double in(int r, size_t i) { return input<T>(r, i + offset); }
    static double reduction(size_t i) { return reduced(op, ranks, i, &ref<T>::in); }
    static double root_input(size_t i) { return input<T>(root, i + offset); }
};
template <class T>
int ref<T>::ranks = 0;
template <class T>
ccl::reduction ref<T>::op = ccl::reduction::sum;
template <class T>
size_t ref<T>::offset = 0;
template <class T>
int ref<T>::root = 0;

template <class T>
void test_reductions(ccl::communicator& comm, bool large) {
    const int rank = comm.rank(), size = comm.size();
    const ccl::datatype dt = ccl::native_type_info<T>::dtype;
    ref<T>::ranks = size;
    ref<T>::offset = 0;
    for (size_t n : kCounts) {
        if (n > 1000 && !large) continue;
        for (ccl::reduction op : kOps) {
            g_prod = op == ccl::reduction::prod;
            ref<T>::op = op;
            const std::vector<T> in = inputs<T>(rank, n);
            // allreduce: out of place (typed), in place (void*), waited at once.
            std::vector<T> out(n);
            ccl::allreduce(in.data(), out.data(), n, op, comm).wait();
            expect_values(out.data(), n, "allreduce", &ref<T>::reduction);
            std::vector<T> io = in;
            ccl::allreduce(io.data(), io.data(), n, dt, op, comm).wait();
            expect_values(io.data(), n, "allreduce in place", &ref<T>::reduction);

            // reduce at two roots, out of place and in place.
            for (int root = 0; root<size; root += size - 1> 0 ? size - 1 : 1) {
                std::vector<T> r(n);
                ccl::reduce(in.data(), r.data(), n, op, root, comm).wait();
                if (rank == root) expect_values(r.data(), n, "reduce", &ref<T>::reduction);
                std::vector<T> ri = in;
                ccl::reduce(ri.data(), ri.data(), n, dt, op, root, comm).wait();
                if (rank == root)
                    expect_values(ri.data(), n, "reduce in place", &ref<T>::reduction);
                if (size == 1) break;
            }

            // reduce_scatter: block `rank` of everyone's size * n elements, out of and in place.
            const std::vector<T> all = inputs<T>(rank, n * size);
            std::vector<T> block(n);
            ccl::reduce_scatter(all.data(), block.data(), n, op, comm).wait();
            ref<T>::offset = n * rank;
            expect_values(block.data(), n, "reduce_scatter", &ref<T>::reduction);
            std::vector<T> alli = all;
            ccl::reduce_scatter(alli.data(), alli.data() + n * rank, n, dt, op, comm).wait();
            expect_values(alli.data() + n * rank, n, "reduce_scatter in place", &ref<T>::reduction);
            ref<T>::offset = 0;
        }
    }
    g_prod = false;
}

template <class T>
void test_movement(ccl::communicator& comm, bool large) {
    const int rank = comm.rank(), size = comm.size();
    const ccl::datatype dt = ccl::native_type_info<T>::dtype;
    for (size_t n : kCounts) {
        if (n > 1000 && !large) continue;
        // broadcast from each end, in place and from a separate send buffer.
        for (int root = 0; root<size; root += size - 1> 0 ? size - 1 : 1) {
            ref<T>::root = root;
            ref<T>::offset = 0;
            std::vector<T> b = rank == root ? inputs<T>(rank, n) : std::vector<T>(n);
            ccl::broadcast(b.data(), n, root, comm).wait();
            expect_values(b.data(), n, "broadcast", &ref<T>::root_input);
            const std::vector<T> s = inputs<T>(rank, n);
            std::vector<T> r(n);
            ccl::broadcast(const_cast<T*>(s.data()), r.data(), n, dt, root, comm).wait();
            expect_values(r.data(), n, "broadcast send/recv", &ref<T>::root_input);
            if (size == 1) break;
        }
        // allgather: rank r's n elements at block r.
        const std::vector<T> mine = inputs<T>(rank, n);
        std::vector<T> g(n * size);
        ccl::allgather(mine.data(), g.data(), n, comm).wait();
        for (int r = 0; r < size; ++r) {
            ref<T>::root = r;
            expect_values(g.data() + n * r, n, "allgather", &ref<T>::root_input);
        }
        // allgatherv: rank r sends n + r elements; one buffer, in place, and a vector of
        // buffers that are not one after another (the staged form) and that are (the direct).
        std::vector<size_t> counts(size);
        size_t total = 0;
        for (int r = 0; r < size; ++r) total += counts[r] = n + r;
        size_t at_me = 0;
        for (int r = 0; r < rank; ++r) at_me += counts[r];
        const std::vector<T> mv = inputs<T>(rank, counts[rank]);
        std::vector<T> gv(total);
        ccl::allgatherv(mv.data(), counts[rank], gv.data(), counts, comm).wait();
        std::vector<T> gi(total);
        std::copy(mv.begin(), mv.end(), gi.begin() + at_me);
        ccl::allgatherv(gi.data() + at_me, counts[rank], gi.data(), counts, dt, comm).wait();
        std::vector<std::vector<T>> parts(size);
        std::vector<T*> bufs(size);
        for (int r = size - 1; r >= 0; --r) {  // separate allocations
            parts[r].resize(counts[r] + 1);
            bufs[r] = parts[r].data();
        }
        ccl::allgatherv(mv.data(), counts[rank], bufs, counts, comm).wait();
        std::vector<T> direct(total);
        std::vector<void*> dbufs(size);
        for (int r = 0, at = 0; r < size; at += static_cast<int>(counts[r]), ++r)
            dbufs[r] = direct.data() + at;
        ccl::allgatherv(mv.data(), counts[rank], dbufs, counts, dt, comm).wait();
        for (int r = 0, at = 0; r < size; at += static_cast<int>(counts[r]), ++r) {
            ref<T>::root = r;
            expect_values(gv.data() + at, counts[r], "allgatherv", &ref<T>::root_input);
            expect_values(gi.data() + at, counts[r], "allgatherv in place", &ref<T>::root_input);
            expect_values(parts[r].data(), counts[r], "allgatherv vector", &ref<T>::root_input);
            expect_values(direct.data() + at, counts[r], "allgatherv vector direct",
                          &ref<T>::root_input);
        }
        // alltoall: block j of rank r's input (offset n * j) lands as block r at rank j.
        const std::vector<T> a = inputs<T>(rank, n * size);
        std::vector<T> ao(n * size);
        ccl::alltoall(a.data(), ao.data(), n, comm).wait();
        std::vector<T> ai = a;
        ccl::alltoall(ai.data(), ai.data(), n, dt, comm).wait();
        for (int r = 0; r < size; ++r) {
            ref<T>::root = r;
            ref<T>::offset = n * rank;
            expect_values(ao.data() + n * r, n, "alltoall", &ref<T>::root_input);
            expect_values(ai.data() + n * r, n, "alltoall in place", &ref<T>::root_input);
        }
        // alltoallv: rank r sends (n + r + j) % 5 + n elements to rank j, out of and in place.
        std::vector<size_t> sc(size), rc(size);
        size_t st = 0, rt = 0;
        for (int j = 0; j < size; ++j) {
            st += sc[j] = (n + rank + j) % 5 + n;
            rt += rc[j] = (n + j + rank) % 5 + n;
        }
        const std::vector<T> av = inputs<T>(rank, st);
        std::vector<T> avo(rt);
        ccl::alltoallv(av.data(), sc, avo.data(), rc, comm).wait();
        std::vector<T> avi(st > rt ? st : rt);
        std::copy(av.begin(), av.end(), avi.begin());
        ccl::alltoallv(avi.data(), sc, avi.data(), rc, dt, comm).wait();
        for (int j = 0, at = 0; j < size; at += static_cast<int>(rc[j]), ++j) {
            size_t off = 0;  // where rank j's block for this rank starts in its input
            for (int k = 0; k < rank; ++k) off += (n + j + k) % 5 + n;
            ref<T>::root = j;
            ref<T>::offset = off;
            expect_values(avo.data() + at, rc[j], "alltoallv", &ref<T>::root_input);
            expect_values(avi.data() + at, rc[j], "alltoallv in place", &ref<T>::root_input);
        }
        ref<T>::offset = 0;
    }
}

// Several operations left running at once, completed by wait() and by test() in any order.
template <class T>
void test_nonblocking(ccl::communicator& comm) {
    const int rank = comm.rank(), size = comm.size();
    const size_t n = 1000;
    ref<T>::ranks = size;
    ref<T>::op = ccl::reduction::sum;
    ref<T>::offset = 0;
    ref<T>::root = 0;
    const std::vector<T> in = inputs<T>(rank, n);
    std::vector<std::vector<T>> outs(6, std::vector<T>(n));
    std::vector<T> b = rank == 0 ? in : std::vector<T>(n);
    std::vector<T> g(n * size);
    std::vector<ccl::event> evs;
    for (int k = 0; k < 6; ++k)
        evs.push_back(ccl::allreduce(in.data(), outs[k].data(), n, ccl::reduction::sum, comm));
    evs.push_back(ccl::broadcast(b.data(), n, 0, comm));
    evs.push_back(ccl::allgather(in.data(), g.data(), n, comm));
    evs.push_back(ccl::barrier(comm));
    // test() until done for the odd ones, wait() for the rest.
    for (size_t k = 0; k < evs.size(); ++k) {
        if (k % 2) {
            while (!evs[k].test()) {
            }
            CHECK(evs[k].test() && static_cast<bool>(evs[k]), "a completed event tests true");
        } else {
            evs[k].wait();
            evs[k].wait();  // again: a completed event
        }
    }
    for (int k = 0; k < 6; ++k)
        expect_values(outs[k].data(), n, "nonblocking allreduce", &ref<T>::reduction);
    expect_values(b.data(), n, "nonblocking broadcast", &ref<T>::root_input);
    for (int r = 0; r < size; ++r) {
        ref<T>::root = r;
        expect_values(g.data() + n * r, n, "nonblocking allgather", &ref<T>::root_input);
    }
    // An event that goes without a wait: its destructor completes the operation.
    std::vector<T> d(n);
    { ccl::allreduce(in.data(), d.data(), n, ccl::reduction::sum, comm); }
    expect_values(d.data(), n, "allreduce whose event was dropped", &ref<T>::reduction);
    // synchronous: complete when the call returns.
    ccl::allreduce_attr sync = ccl::create_operation_attr<ccl::allreduce_attr>(
        ccl::attr_val<ccl::operation_attr_id::synchronous>(true));
    std::vector<T> s(n);
    ccl::event e = ccl::allreduce(in.data(), s.data(), n, ccl::reduction::sum, comm, sync);
    CHECK(e.test(), "a synchronous operation's event is complete at once");
    expect_values(s.data(), n, "synchronous allreduce", &ref<T>::reduction);
    // Dependencies: the second allreduce starts after the first completed.
    std::vector<T> first(n), second(n);
    std::vector<ccl::event> deps;
    deps.push_back(ccl::allreduce(in.data(), first.data(), n, ccl::reduction::sum, comm));
    ccl::allreduce(in.data(), second.data(), n, ccl::reduction::sum, comm,
                   ccl::default_allreduce_attr, deps)
        .wait();
    expect_values(first.data(), n, "dependency", &ref<T>::reduction);
    expect_values(second.data(), n, "after a dependency", &ref<T>::reduction);
}

template <class T>
void test_type(ccl::communicator& comm, bool large) {
    test_reductions<T>(comm, large);
    test_movement<T>(comm, large);
}

/* ---- The match_id cache, point to point, splits, groups, registered datatypes ---- */

void test_cache(ccl::communicator& comm) {
    const int rank = comm.rank(), size = comm.size();
    ref<float>::ranks = size;
    ref<float>::op = ccl::reduction::sum;
    ref<float>::offset = 0;
    ccl::allreduce_attr attr = ccl::create_operation_attr<ccl::allreduce_attr>();
    CHECK(!attr.get<ccl::operation_attr_id::to_cache>(), "to_cache is off by default");
    attr.set<ccl::operation_attr_id::to_cache>(true);
    CHECK(attr.set<ccl::operation_attr_id::match_id>(ccl::string_class("grad.w")).empty(),
          "set returns the previous value");
    CHECK(attr.get<ccl::operation_attr_id::match_id>() == "grad.w", "match_id reads back");
    const ccl::allreduce_attr copy = attr;  // attributes copy by value
    attr.set<ccl::operation_attr_id::match_id>(ccl::string_class("grad.b"));
    CHECK(copy.get<ccl::operation_attr_id::match_id>() == "grad.w", "a copy keeps its match_id");
    CHECK(ccl::default_allreduce_attr.get<ccl::operation_attr_id::match_id>().empty(),
          "the default attribute is untouched");
    for (int it = 0; it < 4; ++it) {
        // New buffers (other addresses) and new data on every call under one match_id.
        std::vector<float> in = inputs<float>(rank, 1000);
        for (float& x : in) x *= static_cast<float>(it + 1);
        std::vector<float> out(1000 + it);
        ccl::allreduce(in.data(), out.data() + it, 1000, ccl::reduction::sum, comm, copy).wait();
        for (size_t i = 0; i < 1000; ++i)
            CHECK(out[i + it] == ref<float>::reduction(i) * (it + 1),
                  "cached allreduce, call %d, element %zu", it, i);
    }
    // The same match_id for another call is refused, not run with the wrong plan.
    std::vector<float> small(10), small_out(10);
    expect_throw<ccl::exception>(
        [&] {
            ccl::allreduce(small.data(), small_out.data(), 10, ccl::reduction::sum, comm, copy);
        },
        "match_id", "a match_id reused for another count");
    // to_cache without a match_id: not cached, still correct.
    ccl::allreduce_attr unnamed = ccl::create_operation_attr<ccl::allreduce_attr>(
        ccl::attr_val<ccl::operation_attr_id::to_cache>(true));
    std::vector<float> in = inputs<float>(rank, 7), out(7);
    ccl::allreduce(in.data(), out.data(), 7, ccl::reduction::sum, comm, unnamed).wait();
    expect_values(out.data(), 7, "to_cache without a match_id", &ref<float>::reduction);
}

void test_p2p(ccl::communicator& comm) {
    const int rank = comm.rank(), size = comm.size();
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (size_t n : kCounts) {
        // A ring: send to the next rank, receive from the previous one, both left running.
        const std::vector<int32_t> s = inputs<int32_t>(rank, n);
        std::vector<int32_t> r(n);
        ccl::event recv = ccl::recv(r.data(), n, prev, comm);
        ccl::event send = ccl::send(const_cast<int32_t*>(s.data()), n, next, comm);
        send.wait();
        recv.wait();
        ref<int32_t>::root = prev;
        ref<int32_t>::offset = 0;
        expect_values(r.data(), n, "recv", &ref<int32_t>::root_input);
        // void* forms and another datatype, blocking in turn (rank 0 sends first).
        std::vector<double> d = inputs<double>(rank, n), e(n);
        if (rank % 2 == 0) {
            ccl::send(d.data(), n, ccl::datatype::float64, next, comm).wait();
            ccl::recv(e.data(), n, ccl::datatype::float64, prev, comm).wait();
        } else {
            ccl::recv(e.data(), n, ccl::datatype::float64, prev, comm).wait();
            ccl::send(d.data(), n, ccl::datatype::float64, next, comm).wait();
        }
        ref<double>::root = prev;
        ref<double>::offset = 0;
        expect_values(e.data(), n, "recv float64", &ref<double>::root_input);
    }
    // pt2pt_attr: group_id is kept (and has no effect, as in oneCCL).
    ccl::pt2pt_attr attr =
        ccl::create_operation_attr<ccl::pt2pt_attr>(ccl::attr_val<ccl::pt2pt_attr_id::group_id>(5));
    CHECK(attr.get<ccl::pt2pt_attr_id::group_id>() == 5, "group_id reads back");
    int32_t x = rank, y = -1;
    ccl::event rv = ccl::recv(&y, 1, prev, comm, attr);
    ccl::send(&x, 1, next, comm, attr).wait();
    rv.wait();
    CHECK(y == prev, "recv with attributes: %d", y);
}

void test_split(ccl::communicator& comm) {
    const int rank = comm.rank(), size = comm.size();
    // Even and odd ranks.
    ccl::communicator half = comm.split(ccl::preview::create_comm_split_attr(
        ccl::attr_val<ccl::comm_split_attr_id::color>(rank % 2)));
    CHECK(half.size() == (size + 1 - rank % 2) / 2, "split size %d", half.size());
    CHECK(half.rank() == rank / 2, "split rank %d", half.rank());
    std::vector<int> members;
    for (int r = rank % 2; r < size; r += 2) members.push_back(r);
    // Its collectives: sum of the members' ranks, and a broadcast from its last rank.
    int64_t mine = rank, sum = 0;
    ccl::allreduce(&mine, &sum, 1, ccl::reduction::sum, half).wait();
    int64_t want = 0;
    for (int r : members) want += r;
    CHECK(sum == want, "split allreduce %lld, expected %lld", (long long)sum, (long long)want);
    int32_t b = half.rank() == half.size() - 1 ? 1000 + rank : 0;
    ccl::broadcast(&b, 1, half.size() - 1, half).wait();
    CHECK(b == 1000 + members.back(), "split broadcast %d", b);
    test_type<float>(half, false);
    // The parent still works, and splits again: everyone in one, reversed by key (rank order is
    // kept: oneCCL's split takes no key).
    ccl::comm_split_attr one = ccl::preview::create_comm_split_attr();
    one.set<ccl::comm_split_attr_id::color>(7);
    CHECK(one.is_valid<ccl::comm_split_attr_id::color>(), "color is set");
    std::vector<std::pair<ccl::communicator, ccl::comm_split_attr>> pairs;
    pairs.push_back(std::make_pair(std::move(half), one));
    std::vector<ccl::communicator> all = ccl::preview::split_communicators(pairs);
    CHECK(
        all.size() == 1 && all[0].size() == (size + 1 - rank % 2) / 2 && all[0].rank() == rank / 2,
        "split_communicators");
    ccl::communicator whole = comm.split(one);
    CHECK(whole.size() == size && whole.rank() == rank, "split of one color");
    int32_t v = 1, total = 0;
    ccl::allreduce(&v, &total, 1, ccl::reduction::sum, whole).wait();
    CHECK(total == size, "split allreduce %d", total);
    // A moved-from communicator is empty.
    ccl::communicator moved = std::move(whole);
    expect_throw<ccl::invalid_argument>([&] { (void)whole.rank(); }, "empty", "moved-from rank");
    CHECK(moved.rank() == rank, "moved-to rank");
}

void test_groups(ccl::communicator& comm) {
    const int rank = comm.rank(), size = comm.size();
    ref<int32_t>::ranks = size;
    ref<int32_t>::op = ccl::reduction::sum;
    ref<int32_t>::offset = 0;
    const std::vector<int32_t> in = inputs<int32_t>(rank, 100);
    std::vector<int32_t> a(100), b(100), c(100);
    std::vector<std::vector<int32_t>> parts(size, std::vector<int32_t>(101));
    std::vector<int32_t*> bufs(size);
    std::vector<size_t> counts(size, 100);
    for (int r = 0; r < size; ++r) bufs[r] = parts[size - 1 - r].data();
    ccl::event ea;
    ccl::group_start();
    ea = ccl::allreduce(in.data(), a.data(), 100, ccl::reduction::sum, comm);
    ccl::event eb = ccl::allreduce(in.data(), b.data(), 100, ccl::reduction::sum, comm);
    expect_throw<ccl::unsupported>([&] { eb.wait(); }, "group_end", "wait inside its group");
    CHECK(!eb.test(), "an operation of an open group is not complete");
    // Events that go while their group is open: group_end completes their operations (one of
    // them copies out of a staging buffer).
    { ccl::allreduce(in.data(), c.data(), 100, ccl::reduction::sum, comm); }
    { ccl::allgatherv(in.data(), 100, bufs, counts, comm); }
    ccl::group_end();
    ea.wait();
    eb.wait();
    expect_values(a.data(), 100, "group allreduce a", &ref<int32_t>::reduction);
    expect_values(b.data(), 100, "group allreduce b", &ref<int32_t>::reduction);
    expect_values(c.data(), 100, "group allreduce whose event went", &ref<int32_t>::reduction);
    for (int r = 0; r < size; ++r) {
        ref<int32_t>::root = r;
        expect_values(bufs[r], 100, "group allgatherv whose event went", &ref<int32_t>::root_input);
    }
    expect_throw<ccl::exception>([] { ccl::group_end(); }, "group", "group_end without start");
}

// A datatype of 12 bytes, registered: it moves as bytes.
struct point {
    int32_t x, y, z;
};

void test_registered(ccl::communicator& comm) {
    const int rank = comm.rank(), size = comm.size();
    const ccl::datatype pt = ccl::register_datatype(
        ccl::create_datatype_attr(ccl::attr_val<ccl::datatype_attr_id::size>(sizeof(point))));
    CHECK(ccl::get_datatype_size(pt) == sizeof(point), "registered size");
    CHECK(ccl::get_datatype_size(ccl::datatype::bfloat16) == 2, "bfloat16 size");
    point mine = {rank, 10 * rank, 100 * rank};
    std::vector<point> all(size);
    ccl::allgather(&mine, all.data(), 1, pt, comm).wait();
    for (int r = 0; r < size; ++r)
        CHECK(all[r].x == r && all[r].y == 10 * r && all[r].z == 100 * r, "registered allgather");
    point b = rank == 0 ? point{1, 2, 3} : point{0, 0, 0};
    ccl::broadcast(&b, 1, pt, 0, comm).wait();
    CHECK(b.x == 1 && b.y == 2 && b.z == 3, "registered broadcast");
    expect_throw<ccl::unsupported>(
        [&] { ccl::allreduce(&mine, &b, 1, pt, ccl::reduction::sum, comm); }, "reduc",
        "reducing a registered datatype");
    ccl::deregister_datatype(pt);
    expect_throw<ccl::invalid_argument>([&] { ccl::broadcast(&b, 1, pt, 0, comm); },
                                        "neither predefined nor registered", "deregistered");
    expect_throw<ccl::invalid_argument>([] { ccl::deregister_datatype(ccl::datatype::int8); },
                                        "predefined", "deregistering a predefined one");
}

/* ---- What ccl refuses ---- */

void bad_reduction(const void*, size_t, void*, size_t*, ccl::datatype, const ccl::fn_context*) {}

// An application's own store: ccl cannot bootstrap through it.
class my_kvs : public ccl::kvs_interface {
public:
    ccl::vector_class<char> get(const ccl::string_class&) override { return {}; }
    void set(const ccl::string_class&, const ccl::vector_class<char>&) override {}
};

void test_refused(ccl::communicator& comm, ccl::shared_ptr_class<ccl::kvs> kvs) {
    const int size = comm.size();
    int32_t x = 1, y = 0;
    expect_throw<ccl::unsupported>([&] { ccl::allreduce(&x, &y, 1, ccl::reduction::custom, comm); },
                                   "custom", "reduction::custom");
    ccl::allreduce_attr fn = ccl::create_operation_attr<ccl::allreduce_attr>(
        ccl::attr_val<ccl::allreduce_attr_id::reduction_fn>(&bad_reduction));
    CHECK(fn.get<ccl::allreduce_attr_id::reduction_fn>().get() == &bad_reduction,
          "reduction_fn reads back");
    expect_throw<ccl::unsupported>(
        [&] { ccl::allreduce(&x, &y, 1, ccl::reduction::sum, comm, fn); }, "custom",
        "reduction_fn");
    expect_throw<ccl::invalid_argument>(
        [&] {
            ccl::allreduce(&x, &y, 1, static_cast<ccl::datatype>(99), ccl::reduction::sum, comm);
        },
        "datatype 99", "an unknown datatype");
    expect_throw<ccl::unsupported>([&] { kvs->get("k"); }, "get or set", "kvs::get");
    expect_throw<ccl::unsupported>([&] { kvs->set("k", {'v'}); }, "get or set", "kvs::set");
    expect_throw<ccl::unsupported>(
        [&] { ccl::create_communicator(size, comm.rank(), std::make_shared<my_kvs>()); },
        "kvs_interface", "an application's kvs_interface");
    expect_throw<ccl::unsupported>([&] { ccl::preview::create_communicator(size, kvs); },
                                   "without a rank", "a communicator without a rank");
    std::vector<std::pair<int, ccl::device>> two;
    two.push_back(std::make_pair(0, ccl::create_device()));
    two.push_back(std::make_pair(1, ccl::create_device()));
    expect_throw<ccl::unsupported>(
        [&] { ccl::create_communicators(size, two, ccl::create_context(), kvs); },
        "one rank of a communicator per process", "two ranks in one process");
    std::vector<void*> bufs(size, &y);
    expect_throw<ccl::unsupported>([&] { ccl::allgather(&x, bufs, 1, ccl::datatype::int32, comm); },
                                   "allgatherv only", "allgather into a vector of buffers");
    expect_throw<ccl::unsupported>(
        [&] { ccl::alltoall(bufs, bufs, 1, ccl::datatype::int32, comm); }, "allgatherv only",
        "alltoall of vectors");
    std::vector<size_t> wrong(size + 1, 1);
    expect_throw<ccl::invalid_argument>([&] { ccl::allgatherv(&x, 1, &y, wrong, comm); }, "entries",
                                        "recv_counts of wrong size");
    expect_throw<ccl::unsupported>([&] { ccl::barrier(comm).cancel(); }, "cancel", "cancel");
    ccl::kvs_attr ip = ccl::create_kvs_attr(
        ccl::attr_val<ccl::kvs_attr_id::ip_port>(ccl::string_class("127.0.0.1:1234")));
    expect_throw<ccl::unsupported>([&] { ccl::create_main_kvs(ip); }, "CCL_KVS_IFACE",
                                   "kvs_attr ip_port");
    expect_throw<ccl::exception>(
        [] {
            ccl::allreduce_attr a;
            a.set<ccl::operation_attr_id::version>(ccl::get_library_version());
        },
        "read-only", "setting the version");
    expect_throw<ccl::invalid_argument>([&] { comm.split(ccl::comm_split_attr()); }, "color",
                                        "split without a color");
    ccl::kvs::address_type junk;
    junk.fill('x');
    expect_throw<ccl::invalid_argument>([&] { ccl::create_kvs(junk); }, "NUL",
                                        "an address without its NUL");
    // A failure of the C ABI carries its message (which names the C call).
    expect_throw<ccl::invalid_argument>(
        [&] { ccl::broadcast(&x, 1, ccl::datatype::int32, size + 3, comm); }, "ccl_broadcast",
        "a root out of range");
}

}  // namespace

int main() {
    ccl::init();
    const ccl::library_version v = ccl::get_library_version();
    CHECK(v.major == CCL_MAJOR_VERSION && v.minor == CCL_MINOR_VERSION && v.major == 2021,
          "oneCCL API version %u.%u", v.major, v.minor);
    CHECK(std::string(v.full).find("ccl ") == 0, "full version '%s'", v.full);
    CHECK(ccl::event().test(), "a default event is complete");

    // The job's communicator, from cclrun's variables; then the oneCCL way: rank 0's main KVS,
    // its address broadcast (over the first communicator), and create_communicator over it.
    ccl::communicator world = ccl::preview::create_communicator();
    const int rank = world.rank(), size = world.size();
    g_rank = rank;
    ccl::shared_ptr_class<ccl::kvs> kvs;
    ccl::kvs::address_type addr;
    addr.fill('\0');
    if (rank == 0) {
        kvs = ccl::create_main_kvs();
        addr = kvs->get_address();
        CHECK(std::strchr(addr.data(), ':') != nullptr, "address '%s'", addr.data());
    }
    ccl::broadcast(addr.data(), addr.size(), ccl::datatype::int8, 0, world).wait();
    if (rank != 0) kvs = ccl::create_kvs(addr);
    ccl::device dev = ccl::create_device();
    ccl::communicator comm = ccl::create_communicator(size, rank, dev, ccl::create_context(), kvs);
    CHECK(comm.rank() == rank && comm.size() == size, "create_communicator: %d/%d", comm.rank(),
          comm.size());
    CHECK(comm.get_device() == dev, "a host device");

    // Host streams: accepted where oneCCL takes a stream.
    int32_t one = 1, sum = 0;
    ccl::allreduce(&one, &sum, 1, ccl::reduction::sum, comm, ccl::create_stream()).wait();
    CHECK(sum == size, "allreduce with a stream: %d", sum);
    ccl::barrier(comm, ccl::default_stream).wait();

    test_type<int8_t>(comm, false);
    test_type<uint8_t>(comm, false);
    test_type<int16_t>(comm, false);
    test_type<uint16_t>(comm, false);
    test_type<int32_t>(comm, true);
    test_type<uint32_t>(comm, false);
    test_type<int64_t>(comm, false);
    test_type<uint64_t>(comm, false);
    test_type<ccl::float16>(comm, false);
    test_type<float>(comm, true);
    test_type<double>(comm, false);
    test_type<ccl::bfloat16>(comm, true);
    test_nonblocking<float>(comm);
    test_nonblocking<ccl::bfloat16>(comm);
    test_cache(comm);
    test_p2p(comm);
    test_split(comm);
    test_groups(comm);
    test_registered(comm);
    test_refused(comm, kvs);
    ccl::barrier(comm).wait();
    if (rank == 0) std::printf("test_oneccl_api: %d ranks, %d checks passed\n", size, g_checks);
    return 0;
}

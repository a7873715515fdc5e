/* The C ABI from plain C11: every datatype and reduction through allreduce, broadcast from every
 * root, barrier, errors. Run under cclrun. With "--loop N" it runs N allreduces (for the
 * killed-rank test). Prints one line per rank and exits non-zero on any wrong result. */
#include <ccl/ccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(call)                                                                            \
    do {                                                                                       \
        ccl_result_t r_ = (call);                                                              \
        if (r_ != CCL_SUCCESS) {                                                               \
            fprintf(stderr, "%s failed: %s: %s\n", #call, ccl_strerror(r_), ccl_last_error()); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static size_t type_size(ccl_datatype_t t) {
    static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8};
    return sizes[t];
}

/* Small integers, exactly representable in every type, whose sums and products (at most 8 ranks)
 * stay exact: rank r contributes (r + i) % 3 + 1 at index i. */
static int value(int r, size_t i) { return (int)((size_t)r + i) % 3 + 1; }

static void put(void* buf, size_t i, ccl_datatype_t t, double v) {
    char* p = (char*)buf + i * type_size(t);
    switch (t) {
        case CCL_INT8: {
            int8_t x = (int8_t)v;
            memcpy(p, &x, 1);
            break;
        }
        case CCL_UINT8: {
            uint8_t x = (uint8_t)v;
            memcpy(p, &x, 1);
            break;
        }
        case CCL_INT16: {
            int16_t x = (int16_t)v;
            memcpy(p, &x, 2);
            break;
        }
        case CCL_UINT16: {
            uint16_t x = (uint16_t)v;
            memcpy(p, &x, 2);
            break;
        }
        case CCL_INT32: {
            int32_t x = (int32_t)v;
            memcpy(p, &x, 4);
            break;
        }
        case CCL_UINT32: {
            uint32_t x = (uint32_t)v;
            memcpy(p, &x, 4);
            break;
        }
        case CCL_INT64: {
            int64_t x = (int64_t)v;
            memcpy(p, &x, 8);
            break;
        }
        case CCL_UINT64: {
            uint64_t x = (uint64_t)v;
            memcpy(p, &x, 8);
            break;
        }
        case CCL_FLOAT16: { /* v is a small integer: encode binary16 by hand */
            uint16_t h = 0;
            if (v != 0) {
                int e = 0;
                double m = v < 0 ? -v : v;
                while (m >= 2) {
                    m /= 2;
                    ++e;
                }
                h = (uint16_t)((v < 0 ? 0x8000 : 0) | ((e + 15) << 10) |
                               (uint16_t)((m - 1) * 1024));
            }
            memcpy(p, &h, 2);
            break;
        }
        case CCL_BFLOAT16: {
            float f = (float)v;
            uint32_t u;
            memcpy(&u, &f, 4);
            uint16_t h = (uint16_t)(u >> 16);
            memcpy(p, &h, 2);
            break;
        }
        case CCL_FLOAT32: {
            float f = (float)v;
            memcpy(p, &f, 4);
            break;
        }
        case CCL_FLOAT64: memcpy(p, &v, 8); break;
    }
}

static int is_float(ccl_datatype_t t) { return t >= CCL_FLOAT16; }

static double expected(ccl_reduction_t op, int size, size_t i, ccl_datatype_t t) {
    double acc = value(0, i);
    int r;
    for (r = 1; r < size; ++r) {
        double v = value(r, i);
        if (op == CCL_SUM || op == CCL_AVG)
            acc += v;
        else if (op == CCL_PROD)
            acc *= v;
        else if (op == CCL_MIN)
            acc = v < acc ? v : acc;
        else
            acc = v > acc ? v : acc;
    }
    if (op == CCL_AVG) {
        if (is_float(t)) {
            acc /= size;
        } else {
            acc = (double)((long long)acc / size);
        }
    }
    return acc;
}

int main(int argc, char** argv) {
    ccl_comm_t comm;
    int rank, size, t, o, root, major, minor, patch;
    const size_t count = 1001;
    char *send, *recv, *want;

    CHECK(ccl_get_version(&major, &minor, &patch));
    CHECK(ccl_comm_create_from_env(&comm));
    CHECK(ccl_comm_rank(comm, &rank));
    CHECK(ccl_comm_size(comm, &size));
    {
        /* The default footprint: 2 x 1 MiB buffers and the lanes per rank, at most 32 MiB. */
        size_t shm = 0;
        CHECK(ccl_comm_shm_bytes(comm, &shm));
        if (getenv("CCL_SHM_BUFFER_SIZE") == NULL && (shm < (2u << 20) || shm > (32u << 20))) {
            fprintf(stderr, "rank %d: ccl_comm_shm_bytes gave %zu bytes\n", rank, shm);
            return 1;
        }
        if (ccl_comm_shm_bytes(comm, NULL) != CCL_ERROR_INVALID_ARGUMENT) {
            fprintf(stderr, "rank %d: ccl_comm_shm_bytes(NULL) was accepted\n", rank);
            return 1;
        }
    }

    if (argc == 3 && strcmp(argv[1], "--loop") == 0) {
        long n = atol(argv[2]), it;
        float x[256];
        for (it = 0; it < n; ++it) {
            ccl_result_t r = ccl_allreduce(x, x, 256, CCL_FLOAT32, CCL_SUM, comm, NULL, NULL);
            if (r != CCL_SUCCESS) {
                fprintf(stderr, "rank %d: allreduce %ld: %s: %s\n", rank, it, ccl_strerror(r),
                        ccl_last_error());
                ccl_comm_destroy(comm);
                return 3;
            }
        }
        CHECK(ccl_comm_destroy(comm));
        return 0;
    }

    send = malloc(count * 8);
    recv = malloc(count * 8);
    want = malloc(count * 8);
    if (!send || !recv || !want) return 1;
    for (t = CCL_INT8; t <= CCL_FLOAT64; ++t) {
        for (o = CCL_SUM; o <= CCL_AVG; ++o) {
            size_t i, es = type_size((ccl_datatype_t)t);
            ccl_coll_attr_t attr = CCL_COLL_ATTR_INIT;
            for (i = 0; i < count; ++i) {
                put(send, i, (ccl_datatype_t)t, value(rank, i));
                put(want, i, (ccl_datatype_t)t,
                    expected((ccl_reduction_t)o, size, i, (ccl_datatype_t)t));
            }
            CHECK(ccl_allreduce(send, recv, count, (ccl_datatype_t)t, (ccl_reduction_t)o, comm,
                                &attr, NULL));
            if (memcmp(recv, want, count * es) != 0) {
                fprintf(stderr, "rank %d: allreduce type %d op %d: wrong result\n", rank, t, o);
                ++failures;
            }
        }
    }
    for (root = 0; root < size; ++root) {
        size_t i;
        for (i = 0; i < count; ++i) put(want, i, CCL_INT32, (double)(root * 1000 + (int)i));
        if (rank == root)
            memcpy(recv, want, count * 4);
        else
            memset(recv, 0, count * 4);
        CHECK(ccl_broadcast(recv, count, CCL_INT32, root, comm, NULL, NULL));
        if (memcmp(recv, want, count * 4) != 0) {
            fprintf(stderr, "rank %d: broadcast from %d: wrong result\n", rank, root);
            ++failures;
        }
    }
    CHECK(ccl_barrier(comm, NULL));
    if (ccl_allreduce(NULL, recv, 1, CCL_FLOAT32, CCL_SUM, comm, NULL, NULL) !=
            CCL_ERROR_INVALID_ARGUMENT ||
        strlen(ccl_last_error()) == 0) {
        fprintf(stderr, "rank %d: NULL send was not refused\n", rank);
        ++failures;
    }
    CHECK(ccl_comm_destroy(comm));
    free(send);
    free(recv);
    free(want);
    printf("rank %d of %d: ccl %d.%d.%d C API %s\n", rank, size, major, minor, patch,
           failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/reduce.h"
#include "shm/collectives.h"

namespace ccl::shm {

namespace {

// Where a rank's buffer holds what: in the first round a header with its counts (sendcounts then
// recvcounts, one uint64 each), then one piece per destination, the same in every round.
struct Layout {
    size_t header, piece;
    Layout(size_t buffer, int n) : header((16 * size_t(n) + 63) / 64 * 64) {
        size_t room = buffer > header ? (buffer - header) / size_t(n) : 0;
        piece = room >= 64 ? room - room % 64 : room - room % 8;
        if (piece == 0)
            throw Error(CCL_ERROR_UNSUPPORTED, "CCL_SHM_BUFFER_SIZE (" + std::to_string(buffer) +
                                                   " bytes) is too small for an all-to-all among " +
                                                   std::to_string(n) + " ranks");
    }
};

}  // namespace

Task alltoallv(Arena& arena, uint32_t sig, const void* send, const size_t* sendcounts, void* recv,
               const size_t* recvcounts, ccl_datatype_t dtype) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t esize = dtype_size(dtype), un = size_t(n);
    const Layout layout(arena.buffer_size(), n);
    std::vector<size_t> sdispl(un + 1, 0), rdispl(un + 1, 0);  // bytes
    for (size_t r = 0; r < un; ++r) {
        sdispl[r + 1] = sdispl[r] + sendcounts[r] * esize;
        rdispl[r + 1] = rdispl[r] + recvcounts[r] * esize;
    }
    const char* in = static_cast<const char*>(send);
    char* out = static_cast<char*>(recv);
    size_t largest = 0;  // the largest block between any two ranks, known after the first round
    for (size_t off = 0, round = 0; round == 0 || off < largest; off += layout.piece, ++round) {
        arena.begin_round(sig);
        co_await arena.buffer_free();
        char* buf = static_cast<char*>(arena.own_buffer());
        if (round == 0) {
            auto* h = reinterpret_cast<uint64_t*>(buf);
            for (size_t r = 0; r < un; ++r) {
                h[r] = sendcounts[r];
                h[un + r] = recvcounts[r];
            }
        }
        for (size_t r = 0; r < un; ++r) {
            size_t bytes = sdispl[r + 1] - sdispl[r];
            if (int(r) != me && off < bytes)
                std::memcpy(buf + layout.header + r * layout.piece, in + sdispl[r] + off,
                            std::min(layout.piece, bytes - off));
        }
        arena.ready();
        co_await arena.all_ready();
        if (round == 0) {
            // Every rank checks the whole matrix, so all of them fail alike (and stay in step).
            for (size_t j = 0; j < un; ++j) {
                auto* hj = static_cast<const uint64_t*>(arena.peer_buffer(int(j)));
                for (size_t k = 0; k < un; ++k) {
                    auto* hk = static_cast<const uint64_t*>(arena.peer_buffer(int(k)));
                    if (hj[k] != hk[un + j]) {
                        arena.done();
                        throw Error(CCL_ERROR_INVALID_USAGE,
                                    "alltoallv counts disagree: rank " + std::to_string(j) +
                                        " sends " + std::to_string(hj[k]) + " elements to rank " +
                                        std::to_string(k) + ", which expects " +
                                        std::to_string(hk[un + j]));
                    }
                    largest = std::max<size_t>(largest, hj[k] * esize);
                }
            }
            // My own block never goes through the arena.
            if (in + sdispl[size_t(me)] != out + rdispl[size_t(me)])
                std::memcpy(out + rdispl[size_t(me)], in + sdispl[size_t(me)],
                            sdispl[size_t(me) + 1] - sdispl[size_t(me)]);
        }
        for (size_t r = 0; r < un; ++r) {
            size_t bytes = rdispl[r + 1] - rdispl[r];
            if (int(r) != me && off < bytes)
                std::memcpy(out + rdispl[r] + off,
                            static_cast<const char*>(arena.peer_buffer(int(r))) + layout.header +
                                size_t(me) * layout.piece,
                            std::min(layout.piece, bytes - off));
        }
        arena.done();
    }
}

}  // namespace ccl::shm

#include "kvs/secret.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/hex.h"
#include "kvs/net.h"

namespace ccl::kvs {

Secret random_secret() {
    Secret s{};
    size_t got = 0;
    while (got < s.size()) {
        // 16 bytes from the urandom pool never block once it is initialised (at boot).
        ssize_t r = getrandom(s.data() + got, s.size() - got, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            throw_errno("getrandom for the KVS job secret");
        }
        got += size_t(r);
    }
    return s;
}

Secret derive_secret(std::string_view shared) {
    // FNV-1a, 128-bit variant: offset basis and prime from the FNV specification.
    unsigned __int128 h = (unsigned __int128)0x6c62272e07bb0142ULL << 64 | 0x62b821756295c58dULL;
    const unsigned __int128 prime = (unsigned __int128)0x0000000001000000ULL << 64 | 0x13bULL;
    for (char c : shared) {
        h ^= static_cast<unsigned char>(c);
        h *= prime;
    }
    Secret s{};
    for (size_t i = 0; i < s.size(); ++i) s[i] = uint8_t(h >> (8 * (s.size() - 1 - i)));
    return s;
}

std::string secret_hex(const Secret& s) { return to_hex(s.data(), s.size()); }

std::optional<Secret> parse_secret_hex(std::string_view text) {
    const std::optional<std::string> bytes = from_hex(text);
    if (!bytes || bytes->size() != kSecretBytes) return std::nullopt;
    Secret s{};
    std::memcpy(s.data(), bytes->data(), s.size());
    return s;
}

bool equal_constant_time(const uint8_t* a, const uint8_t* b, size_t n) {
    // volatile keeps the compiler from turning the loop into an early-exit memcmp.
    volatile uint8_t diff = 0;
    for (size_t i = 0; i < n; ++i) diff = diff | uint8_t(a[i] ^ b[i]);
    return diff == 0;
}

std::string shown_address(std::string_view address) {
    return std::string(address.substr(0, address.find('/')));
}

KvsAddress parse_kvs_address(const std::string& address) {
    KvsAddress out;
    size_t slash = address.find('/');
    out.shown = address.substr(0, slash);
    out.addr = net::parse_address(out.shown);
    auto refuse = [&](const std::string& why) {
        return Error(CCL_ERROR_INVALID_ARGUMENT,
                     "KVS address '" + out.shown + (slash == std::string::npos ? "" : "/...") +
                         "' " + why +
                         ": expected a.b.c.d:port/<32 hex digits>, as ccl_kvs_get_address and "
                         "cclrun give (see docs/reliability.md)");
    };
    if (slash == std::string::npos) throw refuse("carries no job secret");
    auto secret = parse_secret_hex(std::string_view(address).substr(slash + 1));
    if (!secret) throw refuse("has a malformed job secret (not 32 hex digits)");
    out.secret = *secret;
    return out;
}

std::string format_kvs_address(const sockaddr_in& addr, const Secret& secret) {
    return net::format_address(addr) + "/" + secret_hex(secret);
}

}  // namespace ccl::kvs

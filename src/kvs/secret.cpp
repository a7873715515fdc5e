#include "kvs/secret.h"

#include <cstring>

#include "base/error.h"
#include "base/hex.h"
#include "kvs/net.h"

namespace ccl::kvs {

namespace {

// Roles' labels: each proof and each key is a MAC of a different message.
std::string_view label(Role who, bool proof) {
    if (proof) return who == Role::client ? "ccl-kvs-2 client proof" : "ccl-kvs-2 server proof";
    return who == Role::client ? "ccl-kvs-2 client frames" : "ccl-kvs-2 server frames";
}

std::string_view bytes_of(const std::array<uint8_t, kNonceBytes>& a) {
    return {reinterpret_cast<const char*>(a.data()), a.size()};
}

Mac mac_of_nonces(Role who, bool proof, const Secret& secret, const Nonce& client,
                  const Nonce& server) {
    return hmac_sha256(secret.data(), secret.size(),
                       {label(who, proof), bytes_of(client), bytes_of(server)});
}

}  // namespace

Secret random_secret() {
    Secret s{};
    fill_random(s.data(), s.size(), "the KVS job secret");
    return s;
}

Nonce random_nonce() {
    Nonce n{};
    fill_random(n.data(), n.size(), "a KVS connection's nonce");
    return n;
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

Mac proof_of(Role who, const Secret& secret, const Nonce& client, const Nonce& server) {
    return mac_of_nonces(who, true, secret, client, server);
}

Mac frame_key(Role sender, const Secret& secret, const Nonce& client, const Nonce& server) {
    return mac_of_nonces(sender, false, secret, client, server);
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

// The job secret that keeps strangers out of a KVS, and KVS addresses that carry it.
//
// Whoever creates the main KVS (cclrun, rank 0 of a launched job, ccl_kvs_create_main) draws 128
// random bits; the address it hands out is "a.b.c.d:port/<32 hex digits>", so every channel that
// already carries the address (CCL_KVS_ADDRESS, PMI-1, PMIx, an application's own) carries the
// secret with it. A client proves it in the first message of every connection; the server
// compares in constant time. Addresses in logs and error messages are shown without the secret.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ccl::kvs {

inline constexpr size_t kSecretBytes = 16;
using Secret = std::array<uint8_t, kSecretBytes>;

// 128 bits from getrandom(); CCL_ERROR_SYSTEM if the kernel cannot give them.
Secret random_secret();
// A secret every rank computes alike from a value they share (TORCHELASTIC_RUN_ID): as strong as
// that value is hard to guess, no more. FNV-1a 128 spreads it over the 16 bytes.
Secret derive_secret(std::string_view shared);
std::string secret_hex(const Secret& s);
// Exactly 32 hex digits (either case); nullopt otherwise.
std::optional<Secret> parse_secret_hex(std::string_view text);

// Compares n bytes in time that depends on n only, never on where they differ.
bool equal_constant_time(const uint8_t* a, const uint8_t* b, size_t n);

struct KvsAddress {
    sockaddr_in addr{};
    Secret secret{};
    std::string shown;  // "a.b.c.d:port": for logs and messages, never the secret
};

// Parses "a.b.c.d:port/<32 hex digits>". Throws CCL_ERROR_INVALID_ARGUMENT with a message that
// quotes the address without its secret part: malformed host or port, or no (or a malformed)
// secret, which a stranger's or an old-format address lacks.
KvsAddress parse_kvs_address(const std::string& address);
std::string format_kvs_address(const sockaddr_in& addr, const Secret& secret);
// The address without its secret, for logs ("a.b.c.d:port"; anything after '/' dropped).
std::string shown_address(std::string_view address);

}  // namespace ccl::kvs

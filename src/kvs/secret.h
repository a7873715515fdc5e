// The job secret that keeps strangers out of a KVS, KVS addresses that carry it, and how a
// connection proves it without sending it.
//
// Whoever creates the main KVS (cclrun, rank 0 of a launched job, ccl_kvs_create_main) draws 128
// random bits; the address it hands out is "a.b.c.d:port/<32 hex digits>", so every channel that
// already carries the address (CCL_KVS_ADDRESS, PMI-1, PMIx, an application's own) carries the
// secret with it. Addresses in logs and error messages are shown without the secret.
//
// The secret never crosses the wire. Each connection starts with a challenge-response in both
// directions (kvs/protocol.h has the messages): the client sends a fresh nonce, the server answers
// with its own nonce and proof_of(server), the client checks that proof before it sends anything
// else and answers with proof_of(client). A proof is HMAC-SHA-256 (OpenSSL's libcrypto) under the
// secret of a role label and both nonces, so
//   - a captured exchange replayed to a server fails: the server's nonce is new each time;
//   - a process that holds the KVS port and plays server learns a random nonce, nothing more: it
//     cannot make the proof the client checks first;
//   - neither side can be used to compute the other's proof (the labels differ).
// Both sides then derive per-connection keys for each direction that authenticate every later
// frame (protocol::FrameMac): nothing of one connection can be replayed into another. Frames are
// authenticated, not encrypted: a process that relays a connection to the real server can read
// them, not change them (docs/reliability.md).
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "base/mac.h"

namespace ccl::kvs {

inline constexpr size_t kSecretBytes = 16;
inline constexpr size_t kNonceBytes = 16;
inline constexpr size_t kMacBytes = 32;  // HMAC-SHA-256
using Secret = std::array<uint8_t, kSecretBytes>;
using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = ccl::Mac;

// Bytes from getrandom(); CCL_ERROR_SYSTEM if the kernel cannot give them.
Secret random_secret();
Nonce random_nonce();
// A secret every rank computes alike from a value they share (TORCHELASTIC_RUN_ID): as strong as
// that value is hard to guess, no more. FNV-1a 128 spreads it over the 16 bytes.
Secret derive_secret(std::string_view shared);
std::string secret_hex(const Secret& s);
// Exactly 32 hex digits (either case); nullopt otherwise.
std::optional<Secret> parse_secret_hex(std::string_view text);

using ccl::equal_constant_time;  // base/mac.h
using ccl::hmac_sha256;

// The two sides of a connection, and the proof each gives that it knows the secret, bound to this
// connection's nonces.
enum class Role : uint8_t { client, server };
Mac proof_of(Role who, const Secret& secret, const Nonce& client, const Nonce& server);
// The key that authenticates the frames one side sends on this connection.
Mac frame_key(Role sender, const Secret& secret, const Nonce& client, const Nonce& server);

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

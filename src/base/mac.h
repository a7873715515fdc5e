// Random bytes and HMAC-SHA-256 (OpenSSL's libcrypto): what the KVS handshake (kvs/secret.h) and
// the socket transport's (transport/socket.h) build their proofs from.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace ccl {

using Mac = std::array<uint8_t, 32>;  // HMAC-SHA-256

// n bytes from getrandom(); CCL_ERROR_SYSTEM naming `what` if the kernel cannot give them.
void fill_random(uint8_t* out, size_t n, const char* what);

// Compares n bytes in time that depends on n only, never on where they differ.
bool equal_constant_time(const uint8_t* a, const uint8_t* b, size_t n);

// HMAC-SHA-256 of the concatenated parts under `key`.
Mac hmac_sha256(const uint8_t* key, size_t key_len, std::initializer_list<std::string_view> parts);

}  // namespace ccl

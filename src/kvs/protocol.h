// The KVS wire format. Every message is a frame: a 4-byte big-endian body length, then the body.
//   request body: u8 op, then   put: str key, str value | get: str key | barrier: str name, u32 n
//                               | hello: u32 version, 16 bytes job secret (kvs/secret.h)
//   reply body:   u8 status (0 = ok, else a ccl_result_t), str payload (the value, or a message)
// where str is a u32 big-endian length and that many bytes. A connection carries one request at
// a time: the client waits for the reply before it sends the next request. The first request of
// every connection is a hello; the server answers nothing else before it (and closes the
// connection on anything else, or on a hello that does not come within kHelloTimeout).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "ccl/ccl.h"
#include "kvs/secret.h"

namespace ccl::kvs::protocol {

inline constexpr size_t kHeaderSize = 4;
inline constexpr size_t kMaxFrame = size_t{1} << 20;  // body bytes; bounds per-connection memory
inline constexpr size_t kMaxKey = 4096;               // keys and barrier names
inline constexpr uint32_t kVersion = 1;               // of this format, sent in the hello
inline constexpr size_t kHelloBody = 1 + 4 + kSecretBytes;

enum class Op : uint8_t { put = 1, get = 2, barrier = 3, hello = 4 };

struct Request {
    Op op = Op::get;
    std::string key;              // the key, or the barrier's name
    std::string value;            // put only
    uint32_t nranks = 0;          // barrier only
    uint32_t version = kVersion;  // hello only
    Secret secret{};              // hello only
};

inline Request hello_request(const Secret& secret) {
    Request r;
    r.op = Op::hello;
    r.secret = secret;
    return r;
}

struct Reply {
    ccl_result_t status = CCL_SUCCESS;
    std::string payload;  // get: the value; an error: why
};

// A frame that breaks the format. The server closes the connection that sent it.
class ProtocolError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Encoders return a whole frame (header included). encode(Request) throws
// CCL_ERROR_INVALID_ARGUMENT when the key or the frame is too large.
std::string encode(const Request& req);
std::string encode(const Reply& reply);

// Body length from a frame header; throws ProtocolError above kMaxFrame.
size_t body_length(const char* header);

// Decoders take a body (no header) and throw ProtocolError on anything malformed: unknown op,
// truncated or trailing bytes, oversized key, nranks of 0, unknown status.
Request decode_request(std::string_view body);
Reply decode_reply(std::string_view body);

}  // namespace ccl::kvs::protocol

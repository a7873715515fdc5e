// The KVS wire format, version 2. Every message is a frame: a 4-byte big-endian body length, then
// the body.
//   request body: u8 op, then   put: str key, str value | get: str key | barrier: str name, u32 n
//                               | hello: u32 version, client nonce | proof: the client's proof
//   reply body:   u8 status (0 = ok, else a ccl_result_t), str payload (the value, or a message)
// where str is a u32 big-endian length and that many bytes, nonces are kNonceBytes and proofs
// kMacBytes (kvs/secret.h). A connection carries one request at a time: the client waits for the
// reply before it sends the next request.
//
// A connection starts with a handshake (kvs/secret.h says why it is safe):
//   client -> server   hello (version, client nonce)
//   server -> client   a reply whose payload is the challenge: server nonce, then the server's
//                      proof; or a refusal (another version, too many connections)
//   client -> server   proof, sent only once the server's proof checked out
//   server -> client   a sealed reply: ok, or a refusal
// From the server's answer to the proof on, every frame either side sends is sealed (FrameMac):
// its body ends with a MAC, under this connection's key for that direction, of the frame's
// sequence number in that direction and the rest of the body. The server answers nothing before
// a hello, closes the connection on anything else, and on a hello and proof that do not come
// within its deadline. The hello's layout (op, u32 version first) is the same in every version,
// so that a peer of another version is told so rather than misread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "ccl/ccl.h"
#include "kvs/secret.h"

namespace ccl::kvs::protocol {

inline constexpr size_t kHeaderSize = 4;
inline constexpr size_t kMaxFrame = size_t{1} << 20;  // body bytes, MAC included
inline constexpr size_t kMaxKey = 4096;               // keys and barrier names
inline constexpr uint32_t kVersion = 2;               // of this format, sent in the hello
inline constexpr size_t kHelloBody = 1 + 4 + kNonceBytes;
inline constexpr size_t kProofBody = 1 + kMacBytes;
inline constexpr size_t kChallengePayload = kNonceBytes + kMacBytes;

enum class Op : uint8_t { put = 1, get = 2, barrier = 3, hello = 4, proof = 5 };

struct Request {
    Op op = Op::get;
    std::string key;              // the key, or the barrier's name
    std::string value;            // put only
    uint32_t nranks = 0;          // barrier only
    uint32_t version = kVersion;  // hello only
    Nonce nonce{};                // hello only: the client's
    Mac proof{};                  // proof only
};

inline Request hello_request(const Nonce& client_nonce) {
    Request r;
    r.op = Op::hello;
    r.nonce = client_nonce;
    return r;
}

inline Request proof_request(const Mac& proof) {
    Request r;
    r.op = Op::proof;
    r.proof = proof;
    return r;
}

struct Reply {
    ccl_result_t status = CCL_SUCCESS;
    std::string payload;  // get: the value; the hello's: the challenge; an error: why
};

struct Challenge {
    Nonce server_nonce{};
    Mac server_proof{};
};
std::string challenge_payload(const Challenge& c);
// nullopt unless exactly kChallengePayload bytes.
std::optional<Challenge> parse_challenge(std::string_view payload);

// A frame that breaks the format. The server closes the connection that sent it.
class ProtocolError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Encoders return a whole frame (header included). encode(Request) throws
// CCL_ERROR_INVALID_ARGUMENT when the key or the frame (once sealed) is too large.
std::string encode(const Request& req);
std::string encode(const Reply& reply);

// Body length from a frame header; throws ProtocolError above kMaxFrame.
size_t body_length(const char* header);

// Decoders take a body (no header) and throw ProtocolError on anything malformed: unknown op,
// truncated or trailing bytes, oversized key, nranks of 0, unknown status.
Request decode_request(std::string_view body);
Reply decode_reply(std::string_view body);

// The version a hello of any version announces (its op and the u32 after it), whatever follows;
// nullopt when the body does not start like a hello.
std::optional<uint32_t> hello_version(std::string_view body);

// One direction of an authenticated connection: seals the frames one side sends, or opens (checks
// and strips) the frames it receives, counting them so that none can be dropped, repeated or
// reordered, and, the key being this connection's, none comes from another connection.
class FrameMac {
public:
    explicit FrameMac(const Mac& key) : key_(key) {}
    // A whole frame (header included) in, the same frame with its MAC appended out.
    std::string seal(std::string_view frame);
    // A received body (message then MAC): the message, or nullopt when the MAC is wrong.
    std::optional<std::string_view> open(std::string_view body);

private:
    Mac mac_of(std::string_view message) const;
    Mac key_;
    uint64_t sequence_ = 0;
};

}  // namespace ccl::kvs::protocol

// libFuzzer target for the KVS wire protocol (src/kvs/protocol.h), the store that the server feeds
// decoded requests to, and the parsing of KVS addresses. The input is read the way the server
// reads a connection: a stream of frames, each also tried as a sealed frame of a session with a
// fixed key (the seeds hold such sessions, make_seeds.py). Properties checked, besides "no crash,
// no leak, no UB" (it is built with ASan and UBSan):
//   - the parsers only ever throw ProtocolError (or ccl::Error for addresses), nothing else;
//   - whatever decodes re-encodes to the very bytes it came from (the encoding is canonical, so
//     a parser that read past a field or skipped one shows up here);
//   - hellos and proofs decode only at their one size (the server checks it before decoding); a
//     hello's version reads the same whatever its size; a challenge parses at its one size only
//     and re-encodes to its bytes;
//   - a frame opens under the session's key only as it was sealed (sealing what it opened to, at
//     the same point of the session, gives the same bytes); any frame sealed opens to itself;
//   - the store gives a reason with every refusal, and forgets a parked connection on drop;
//   - an address parses only with a secret, and its errors never show a secret.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "base/error.h"
#include "kvs/protocol.h"
#include "kvs/secret.h"
#include "kvs/store.h"

using namespace ccl::kvs;

namespace {

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "fuzz_kvs_protocol: %s\n", what);
    std::abort();
}

// The key of the sessions in the seeds: bytes 0..31.
Mac session_key() {
    Mac k{};
    for (size_t i = 0; i < k.size(); ++i) k[i] = uint8_t(i);
    return k;
}

std::string frame_of(std::string_view body) {
    std::string f(4, '\0');
    for (int i = 0; i < 4; ++i) f[size_t(i)] = char(body.size() >> (8 * (3 - i)));
    f.append(body);
    return f;
}

void check_request(std::string_view frame, std::string_view body, Store& store,
                   Store::ConnId conn) {
    protocol::Request req;
    try {
        req = protocol::decode_request(body);
    } catch (const protocol::ProtocolError&) {
        return;
    }
    if (protocol::encode(req) != frame) fail("a request does not re-encode to its bytes");
    if (req.op == protocol::Op::hello) {
        if (protocol::hello_version(body) != req.version) fail("hello_version disagrees");
        return;  // the handshake is the server's business, not the store's
    }
    if (req.op == protocol::Op::proof) return;
    // Small limits, so the fuzzer reaches them.
    for (const auto& d : store.handle(conn, req))
        if (d.reply.status != CCL_SUCCESS && d.reply.payload.empty())
            fail("a refusal without a reason");
    if (store.parked(conn)) store.drop(conn);  // the connection goes away: nothing may dangle
}

void check_reply(std::string_view frame, std::string_view body) {
    protocol::Reply reply;
    try {
        reply = protocol::decode_reply(body);
    } catch (const protocol::ProtocolError&) {
        return;
    }
    if (protocol::encode(reply) != frame) fail("a reply does not re-encode to its bytes");
    auto challenge = protocol::parse_challenge(reply.payload);
    if (bool(challenge) != (reply.payload.size() == protocol::kChallengePayload))
        fail("a challenge parsed at another size, or not at its own");
    if (challenge && protocol::challenge_payload(*challenge) != reply.payload)
        fail("a challenge does not re-encode to its bytes");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view in(reinterpret_cast<const char*>(data), size);
    Store store(64, 1 << 16);
    Store::ConnId conn = 1;
    protocol::FrameMac opener(session_key()), resealer(session_key());
    while (in.size() >= protocol::kHeaderSize) {
        size_t body = 0;
        try {
            body = protocol::body_length(in.data());
        } catch (const protocol::ProtocolError&) {
            break;  // the server closes the connection here
        }
        if (body > protocol::kMaxFrame) fail("body_length let an oversized frame through");
        if (in.size() - protocol::kHeaderSize < body) break;  // truncated: waits for more
        std::string_view frame = in.substr(0, protocol::kHeaderSize + body);
        std::string_view payload = frame.substr(protocol::kHeaderSize);
        const bool is_hello =
            !payload.empty() && uint8_t(payload[0]) == uint8_t(protocol::Op::hello);
        const bool is_proof =
            !payload.empty() && uint8_t(payload[0]) == uint8_t(protocol::Op::proof);
        if ((is_hello && body != protocol::kHelloBody) ||
            (is_proof && body != protocol::kProofBody)) {
            // The server refuses a handshake message of another size before decoding it; it
            // must not decode either.
            bool decoded = true;
            try {
                protocol::decode_request(payload);
            } catch (const protocol::ProtocolError&) {
                decoded = false;
            }
            if (decoded) fail("a hello or proof of the wrong size decoded");
        }
        if (is_hello && payload.size() >= 5) {
            uint32_t v = (uint32_t(uint8_t(payload[1])) << 24) |
                         (uint32_t(uint8_t(payload[2])) << 16) |
                         (uint32_t(uint8_t(payload[3])) << 8) | uint32_t(uint8_t(payload[4]));
            if (protocol::hello_version(payload) != v) fail("hello_version misread a version");
        }
        check_request(frame, payload, store, conn);
        check_reply(frame, payload);
        // As a sealed frame of the session: what opens is what was sealed, at this point of it.
        if (auto message = opener.open(payload)) {
            std::string inner = frame_of(*message);
            if (resealer.seal(inner) != frame) fail("an opened frame does not seal to its bytes");
            check_request(inner, *message, store, conn);
            check_reply(inner, *message);
        }
        {
            protocol::FrameMac a(session_key()), b(session_key());
            std::string sealed = a.seal(frame);
            auto back = b.open(std::string_view(sealed).substr(protocol::kHeaderSize));
            if (!back || *back != payload) fail("a sealed frame does not open to itself");
        }
        in.remove_prefix(frame.size());
        conn = conn % 4 + 1;  // a few connections taking turns
    }
    // The same bytes as an address (what CCL_KVS_ADDRESS or an application could hand us).
    std::string text(reinterpret_cast<const char*>(data), std::min<size_t>(size, 300));
    try {
        KvsAddress a = parse_kvs_address(text);
        size_t slash = text.find('/');
        if (slash == std::string::npos || !parse_secret_hex(text.substr(slash + 1)) ||
            a.secret != *parse_secret_hex(text.substr(slash + 1)))
            fail("an address without a (well-formed) secret parsed");
    } catch (const ccl::Error& e) {
        if (e.code() != CCL_ERROR_INVALID_ARGUMENT) fail("an address error of the wrong kind");
        // Messages quote the address without its secret part (here: a well-formed secret after
        // a bad host or port). The host and port, which may be quoted, hold no '/', so the
        // secret shows only as "/secret" (the same hex digits may appear in the host part).
        size_t slash = text.find('/');
        if (slash != std::string::npos && parse_secret_hex(text.substr(slash + 1)) &&
            std::string(e.what()).find(text.substr(slash)) != std::string::npos)
            fail("an address error shows the secret");
    }
    return 0;
}

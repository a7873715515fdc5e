#include "kvs/protocol.h"

#include <cstring>

#include "base/error.h"

namespace ccl::kvs::protocol {
namespace {

void put_u32(std::string& out, uint32_t v) {
    char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                 static_cast<char>(v)};
    out.append(b, 4);
}

uint32_t get_u32(const char* p) {
    auto u = [&](int i) { return static_cast<uint32_t>(static_cast<unsigned char>(p[i])); };
    return (u(0) << 24) | (u(1) << 16) | (u(2) << 8) | u(3);
}

void put_str(std::string& out, std::string_view s) {
    put_u32(out, static_cast<uint32_t>(s.size()));
    out.append(s);
}

// Bounds-checked reads from a body.
class Reader {
public:
    explicit Reader(std::string_view body) : rest_(body) {}
    uint8_t u8() {
        need(1);
        uint8_t v = static_cast<uint8_t>(rest_[0]);
        rest_.remove_prefix(1);
        return v;
    }
    uint32_t u32() {
        need(4);
        uint32_t v = get_u32(rest_.data());
        rest_.remove_prefix(4);
        return v;
    }
    std::string str(size_t max, const char* what) {
        uint32_t n = u32();
        if (n > max) {
            throw ProtocolError(std::string(what) + " of " + std::to_string(n) + " bytes exceeds " +
                                std::to_string(max));
        }
        need(n);
        std::string s(rest_.substr(0, n));
        rest_.remove_prefix(n);
        return s;
    }
    void bytes(uint8_t* out, size_t n) {
        need(n);
        for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(rest_[i]);
        rest_.remove_prefix(n);
    }
    void end() const {
        if (!rest_.empty()) {
            throw ProtocolError(std::to_string(rest_.size()) + " trailing bytes after the message");
        }
    }

private:
    void need(size_t n) const {
        if (rest_.size() < n) throw ProtocolError("truncated message");
    }
    std::string_view rest_;
};

std::string frame(std::string body) {
    std::string out;
    out.reserve(kHeaderSize + body.size());
    put_u32(out, static_cast<uint32_t>(body.size()));
    out += body;
    return out;
}

}  // namespace

std::string encode(const Request& req) {
    if (req.key.size() > kMaxKey) {
        throw Error(CCL_ERROR_INVALID_ARGUMENT, "KVS key of " + std::to_string(req.key.size()) +
                                                    " bytes exceeds the limit of " +
                                                    std::to_string(kMaxKey));
    }
    std::string body;
    body.push_back(static_cast<char>(req.op));
    if (req.op == Op::hello) {
        put_u32(body, req.version);
        body.append(reinterpret_cast<const char*>(req.nonce.data()), req.nonce.size());
        return frame(std::move(body));
    }
    if (req.op == Op::proof) {
        body.append(reinterpret_cast<const char*>(req.proof.data()), req.proof.size());
        return frame(std::move(body));
    }
    put_str(body, req.key);
    if (req.op == Op::put) put_str(body, req.value);
    if (req.op == Op::barrier) put_u32(body, req.nranks);
    if (body.size() + kMacBytes > kMaxFrame) {  // requests travel sealed
        throw Error(CCL_ERROR_INVALID_ARGUMENT,
                    "KVS value of " + std::to_string(req.value.size()) + " bytes for key '" +
                        req.key + "' exceeds the message limit of " + std::to_string(kMaxFrame));
    }
    return frame(std::move(body));
}

std::string encode(const Reply& reply) {
    std::string body;
    body.push_back(static_cast<char>(reply.status));
    // Error messages are ours and short; values passed the request's limit already.
    put_str(body, reply.payload);
    return frame(std::move(body));
}

size_t body_length(const char* header) {
    uint32_t n = get_u32(header);
    if (n > kMaxFrame) {
        throw ProtocolError("frame of " + std::to_string(n) + " bytes exceeds the limit of " +
                            std::to_string(kMaxFrame));
    }
    return n;
}

Request decode_request(std::string_view body) {
    Reader r(body);
    Request req;
    uint8_t op = r.u8();
    switch (op) {
        case static_cast<uint8_t>(Op::put):
            req.op = Op::put;
            req.key = r.str(kMaxKey, "key");
            req.value = r.str(kMaxFrame, "value");
            break;
        case static_cast<uint8_t>(Op::get):
            req.op = Op::get;
            req.key = r.str(kMaxKey, "key");
            break;
        case static_cast<uint8_t>(Op::barrier):
            req.op = Op::barrier;
            req.key = r.str(kMaxKey, "barrier name");
            req.nranks = r.u32();
            if (req.nranks == 0) throw ProtocolError("barrier with nranks 0");
            break;
        case static_cast<uint8_t>(Op::hello):
            req.op = Op::hello;
            req.version = r.u32();
            r.bytes(req.nonce.data(), req.nonce.size());
            break;
        case static_cast<uint8_t>(Op::proof):
            req.op = Op::proof;
            r.bytes(req.proof.data(), req.proof.size());
            break;
        default: throw ProtocolError("unknown opcode " + std::to_string(op));
    }
    r.end();
    return req;
}

Reply decode_reply(std::string_view body) {
    Reader r(body);
    Reply reply;
    uint8_t status = r.u8();
    if (status > CCL_ERROR_ABORTED) throw ProtocolError("unknown status " + std::to_string(status));
    reply.status = static_cast<ccl_result_t>(status);
    reply.payload = r.str(kMaxFrame, "payload");
    r.end();
    return reply;
}

std::optional<uint32_t> hello_version(std::string_view body) {
    if (body.size() < 5 || static_cast<uint8_t>(body[0]) != static_cast<uint8_t>(Op::hello))
        return std::nullopt;
    return get_u32(body.data() + 1);
}

std::string challenge_payload(const Challenge& c) {
    std::string out(reinterpret_cast<const char*>(c.server_nonce.data()), c.server_nonce.size());
    out.append(reinterpret_cast<const char*>(c.server_proof.data()), c.server_proof.size());
    return out;
}

std::optional<Challenge> parse_challenge(std::string_view payload) {
    if (payload.size() != kChallengePayload) return std::nullopt;
    Challenge c;
    std::memcpy(c.server_nonce.data(), payload.data(), c.server_nonce.size());
    std::memcpy(c.server_proof.data(), payload.data() + c.server_nonce.size(),
                c.server_proof.size());
    return c;
}

Mac FrameMac::mac_of(std::string_view message) const {
    char seq[8];
    for (int i = 0; i < 8; ++i) seq[i] = static_cast<char>(sequence_ >> (8 * (7 - i)));
    return hmac_sha256(key_.data(), key_.size(), {std::string_view(seq, sizeof(seq)), message});
}

std::string FrameMac::seal(std::string_view frame) {
    std::string_view body = frame.substr(kHeaderSize);
    Mac tag = mac_of(body);
    ++sequence_;
    std::string out;
    out.reserve(frame.size() + tag.size());
    put_u32(out, static_cast<uint32_t>(body.size() + tag.size()));
    out.append(body);
    out.append(reinterpret_cast<const char*>(tag.data()), tag.size());
    return out;
}

std::optional<std::string_view> FrameMac::open(std::string_view body) {
    if (body.size() < kMacBytes) return std::nullopt;
    std::string_view message = body.substr(0, body.size() - kMacBytes);
    Mac tag = mac_of(message);
    if (!equal_constant_time(
            tag.data(), reinterpret_cast<const uint8_t*>(body.data() + message.size()), tag.size()))
        return std::nullopt;
    ++sequence_;
    return message;
}

}  // namespace ccl::kvs::protocol

#include "kvs/pmi.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "kvs/net.h"

namespace ccl::kvs {
namespace {

constexpr size_t kMaxLine = 64 << 10;  // a reply longer than this is not PMI-1
constexpr double kFinalizeTimeout = 5;

std::string seconds_text(double s) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", s);
    return buf;
}

// "cmd=x a=1 msg=two words" -> {cmd: x, a: 1, msg: "two words"}: a token without '=' continues
// the previous value (Slurm's messages may hold spaces).
std::map<std::string, std::string> parse_fields(const std::string& line) {
    std::map<std::string, std::string> fields;
    std::string last;
    size_t pos = 0;
    while (pos < line.size()) {
        size_t space = line.find(' ', pos);
        std::string token = line.substr(pos, space == std::string::npos ? space : space - pos);
        pos = space == std::string::npos ? line.size() : space + 1;
        if (token.empty()) continue;
        size_t eq = token.find('=');
        if (eq == std::string::npos) {
            if (!last.empty()) fields[last] += " " + token;
            continue;
        }
        last = token.substr(0, eq);
        fields[last] = token.substr(eq + 1);
    }
    return fields;
}

void check_word(const char* what, const std::string& s, size_t max) {
    if (s.empty() || s.size() > max || s.find_first_of(" =\n") != std::string::npos)
        throw Error(CCL_ERROR_INVALID_ARGUMENT, std::string("PMI ") + what + " '" + s +
                                                    "' must be 1 to " + std::to_string(max) +
                                                    " characters without spaces, '=' or newlines");
}

}  // namespace

PmiClient::PmiClient(int fd, double timeout_s) : fd_(fd), timeout_s_(timeout_s) {
    if (fd < 0) throw Error(CCL_ERROR_INVALID_ARGUMENT, "PMI_FD is not a descriptor");
    Reply init = call("cmd=init pmi_version=1 pmi_subversion=1", "response_to_init");
    if (init.count("pmi_version") && init["pmi_version"] != "1")
        throw Error(CCL_ERROR_PEER_FAILURE,
                    "the launcher on PMI_FD answered init with PMI version " + init["pmi_version"] +
                        ", not 1");
    Reply maxes = call("cmd=get_maxes", "maxes");
    auto number = [&](const char* name, size_t fallback) {
        auto it = maxes.find(name);
        if (it == maxes.end()) return fallback;
        long v = std::strtol(it->second.c_str(), nullptr, 10);
        // The limits count a terminating NUL.
        return v > 1 ? size_t(v - 1) : fallback;
    };
    key_max_ = number("keylen_max", key_max_);
    value_max_ = number("vallen_max", value_max_);
    kvsname_ = call("cmd=get_my_kvsname", "my_kvsname")["kvsname"];
    if (kvsname_.empty())
        throw Error(CCL_ERROR_PEER_FAILURE, "the launcher on PMI_FD named no KVS (get_my_kvsname)");
}

PmiClient::~PmiClient() {
    if (finalized_) return;
    try {
        timeout_s_ = std::min(timeout_s_, kFinalizeTimeout);
        finalize();
    } catch (const std::exception& e) {
        log().debug("PMI finalize: {}", e.what());
    }
}

void PmiClient::put(const std::string& key, const std::string& value) {
    check_word("key", key, key_max_);
    check_word("value", value, value_max_);
    call("cmd=put kvsname=" + kvsname_ + " key=" + key + " value=" + value, "put_result");
}

void PmiClient::barrier() { call("cmd=barrier_in", "barrier_out"); }

std::string PmiClient::get(const std::string& key) {
    check_word("key", key, key_max_);
    Reply r = call("cmd=get kvsname=" + kvsname_ + " key=" + key, "get_result");
    auto it = r.find("value");
    if (it == r.end())
        throw Error(CCL_ERROR_PEER_FAILURE, "the launcher's PMI get of '" + key + "' had no value");
    return it->second;
}

void PmiClient::finalize() {
    finalized_ = true;  // once, even if it fails
    call("cmd=finalize", "finalize_ack");
}

PmiClient::Reply PmiClient::call(const std::string& request, const std::string& expected) {
    std::string cmd = request.substr(4, request.find(' ', 4) - 4);  // "cmd=NAME ...": NAME
    send_line(request + "\n");
    std::string line = read_line();
    Reply r = parse_fields(line);
    if (r["cmd"] != expected)
        throw Error(CCL_ERROR_PEER_FAILURE, "the launcher on PMI_FD answered " + cmd + " with '" +
                                                line + "', expected cmd=" + expected);
    auto rc = r.find("rc");
    if (rc != r.end() && rc->second != "0") {
        std::string msg = r.count("msg") ? r["msg"] : "no message";
        // get of an unknown key: the caller's mistake (or a rank that never put it).
        ccl_result_t code = cmd == "get" ? CCL_ERROR_INVALID_USAGE : CCL_ERROR_PEER_FAILURE;
        throw Error(code, "PMI " + cmd + " failed: rc=" + rc->second + " (" + msg + ")");
    }
    return r;
}

void PmiClient::send_line(const std::string& line) {
    net::Deadline deadline(timeout_s_);
    for (size_t sent = 0; sent < line.size();) {
        // send() keeps a closed peer from raising SIGPIPE; PMI_FD may also be a pipe.
        ssize_t n =
            ::send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == ENOTSOCK) n = ::write(fd_, line.data() + sent, line.size() - sent);
        if (n >= 0) {
            sent += size_t(n);
            continue;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            throw Error(CCL_ERROR_PEER_FAILURE,
                        std::string("writing to the launcher's PMI_FD: ") + std::strerror(errno));
        pollfd p{fd_, POLLOUT, 0};
        if (poll(&p, 1, deadline.remaining_ms()) == 0 && deadline.expired())
            throw Error(CCL_ERROR_TIMEOUT, "the launcher's PMI_FD took no request within " +
                                               seconds_text(timeout_s_) + " s (CCL_KVS_TIMEOUT)");
    }
}

std::string PmiClient::read_line() {
    net::Deadline deadline(timeout_s_);
    for (;;) {
        size_t nl = pending_.find('\n');
        if (nl != std::string::npos) {
            std::string line = pending_.substr(0, nl);
            pending_.erase(0, nl + 1);
            return line;
        }
        if (pending_.size() > kMaxLine)
            throw Error(CCL_ERROR_PEER_FAILURE, "the launcher's PMI_FD sent a line longer than " +
                                                    std::to_string(kMaxLine) + " bytes");
        pollfd p{fd_, POLLIN, 0};
        int ready = poll(&p, 1, deadline.remaining_ms());
        if (ready < 0) {
            if (errno == EINTR) continue;
            throw_errno("PMI: poll");
        }
        if (ready == 0) {
            if (!deadline.expired()) continue;  // woke a rounding step early
            throw Error(CCL_ERROR_TIMEOUT,
                        "no answer from the launcher on PMI_FD within " + seconds_text(timeout_s_) +
                            " s (CCL_KVS_TIMEOUT): did every rank call ccl_comm_create_from_env?");
        }
        char buf[4096];
        ssize_t n = ::read(fd_, buf, sizeof(buf));
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            throw Error(CCL_ERROR_PEER_FAILURE,
                        std::string("reading the launcher's PMI_FD: ") + std::strerror(errno));
        }
        if (n == 0) throw Error(CCL_ERROR_PEER_FAILURE, "the launcher closed PMI_FD");
        pending_.append(buf, size_t(n));
    }
}

}  // namespace ccl::kvs

#include "job_spec.h"

#include <charconv>
#include <stdexcept>

namespace cclrun {

namespace {

constexpr std::string_view kMagic = "cclrun-job 1\n";
constexpr size_t kMaxValue = 1 << 20;

void put(std::string& out, std::string_view key, std::string_view value) {
    out.append(key);
    out.push_back(' ');
    out.append(std::to_string(value.size()));
    out.push_back('\n');
    out.append(value);
    out.push_back('\n');
}

int to_int(std::string_view key, std::string_view v) {
    int n = 0;
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (v.empty() || ec != std::errc() || ptr != v.data() + v.size() || n < 0) {
        throw std::runtime_error("bad job spec: " + std::string(key) + " '" + std::string(v) + "'");
    }
    return n;
}

Bind bind_of(std::string_view v) {
    if (std::optional<Bind> b = bind_named(v)) return *b;
    throw std::runtime_error("bad job spec: bind '" + std::string(v) + "'");
}

}  // namespace

std::string encode(const JobSpec& s) {
    std::string out(kMagic);
    put(out, "host", s.host);
    put(out, "kvs", s.kvs_address);
    put(out, "cwd", s.cwd);
    put(out, "size", std::to_string(s.size));
    put(out, "first", std::to_string(s.first_rank));
    put(out, "local", std::to_string(s.local_size));
    put(out, "label", s.label ? "1" : "0");
    put(out, "bind", bind_name(s.bind));
    put(out, "cores", std::to_string(s.cores_per_rank));
    for (const auto& e : s.env) put(out, "env", e);
    for (const auto& a : s.argv) put(out, "arg", a);
    put(out, "end", "");
    return out;
}

std::optional<JobSpec> decode(std::string_view data) {
    if (data.size() < kMagic.size()) {
        if (kMagic.substr(0, data.size()) != data)
            throw std::runtime_error("not a cclrun job spec");
        return std::nullopt;
    }
    if (data.substr(0, kMagic.size()) != kMagic) throw std::runtime_error("not a cclrun job spec");
    JobSpec s;
    size_t at = kMagic.size();
    for (;;) {
        size_t nl = data.find('\n', at);
        if (nl == std::string_view::npos) {
            if (data.size() - at > 64) throw std::runtime_error("bad job spec: header too long");
            return std::nullopt;
        }
        std::string_view header = data.substr(at, nl - at);
        size_t sp = header.find(' ');
        if (sp == std::string_view::npos) throw std::runtime_error("bad job spec: no length");
        std::string_view key = header.substr(0, sp);
        size_t len = static_cast<size_t>(to_int(key, header.substr(sp + 1)));
        if (len > kMaxValue) throw std::runtime_error("bad job spec: value too long");
        if (data.size() < nl + 1 + len + 1) return std::nullopt;
        std::string_view v = data.substr(nl + 1, len);
        if (data[nl + 1 + len] != '\n') throw std::runtime_error("bad job spec: no record end");
        at = nl + 1 + len + 1;
        if (key == "host")
            s.host = v;
        else if (key == "kvs")
            s.kvs_address = v;
        else if (key == "cwd")
            s.cwd = v;
        else if (key == "size")
            s.size = to_int(key, v);
        else if (key == "first")
            s.first_rank = to_int(key, v);
        else if (key == "local")
            s.local_size = to_int(key, v);
        else if (key == "label")
            s.label = v == "1";
        else if (key == "bind")
            s.bind = bind_of(v);
        else if (key == "cores")
            s.cores_per_rank = to_int(key, v);
        else if (key == "env")
            s.env.emplace_back(v);
        else if (key == "arg")
            s.argv.emplace_back(v);
        else if (key == "end")
            break;
        else
            throw std::runtime_error("bad job spec: unknown key '" + std::string(key) + "'");
    }
    if (s.size < 1 || s.local_size < 1 || s.first_rank + s.local_size > s.size || s.argv.empty() ||
        s.kvs_address.empty()) {
        throw std::runtime_error("bad job spec: incomplete");
    }
    return s;
}

}  // namespace cclrun

#include "hosts.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

namespace cclrun {

namespace {

constexpr int kMaxSlots = 4096;

std::string trim(const std::string& s) {
    auto b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

bool valid_name(const std::string& name) {
    return !name.empty() && std::all_of(name.begin(), name.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '.' || c == '-' || c == '_';
    });
}

int parse_slots(const std::string& text, const std::string& where) {
    int n = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, n);
    if (text.empty() || ec != std::errc() || ptr != end || n < 1 || n > kMaxSlots) {
        throw BadUsage(where + ": slots must be a number in 1.." + std::to_string(kMaxSlots) +
                       ", not '" + text + "'");
    }
    return n;
}

// "name" or "name:slots".
Host parse_host(const std::string& item, const std::string& where) {
    Host h;
    auto colon = item.find(':');
    h.name = item.substr(0, colon);
    if (colon != std::string::npos) h.slots = parse_slots(item.substr(colon + 1), where);
    if (!valid_name(h.name)) {
        throw BadUsage(where + ": '" + h.name +
                       "' is not a host name (letters, digits, '.', '-', '_')");
    }
    return h;
}

void check_unique(const std::vector<Host>& hosts, const std::string& where) {
    std::set<std::string> seen;
    for (const auto& h : hosts) {
        if (!seen.insert(h.name).second) {
            throw BadUsage(where + ": host '" + h.name +
                           "' is listed twice (give it slots instead)");
        }
    }
}

}  // namespace

std::vector<Host> parse_host_list(const std::string& text) {
    std::vector<Host> hosts;
    std::stringstream ss(text);
    for (std::string item; std::getline(ss, item, ',');) {
        hosts.push_back(parse_host(trim(item), "--hosts"));
    }
    if (hosts.empty() || text.back() == ',') throw BadUsage("--hosts: empty host name");
    check_unique(hosts, "--hosts");
    return hosts;
}

std::vector<Host> read_hostfile(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw BadUsage("cannot read the host file '" + path + "'");
    std::vector<Host> hosts;
    int lineno = 0;
    for (std::string line; std::getline(in, line);) {
        ++lineno;
        std::string where = path + ":" + std::to_string(lineno);
        line = trim(line.substr(0, line.find('#')));
        if (line.empty()) continue;
        std::stringstream words(line);
        std::string name, extra;
        words >> name;
        Host h = parse_host(name, where);
        if (words >> extra) {
            if (extra.rfind("slots=", 0) != 0 || h.slots) {
                throw BadUsage(where + ": expected 'name', 'name:slots' or 'name slots=N'");
            }
            h.slots = parse_slots(extra.substr(6), where);
            if (words >> extra) throw BadUsage(where + ": unexpected '" + extra + "'");
        }
        hosts.push_back(h);
    }
    if (hosts.empty()) throw BadUsage("the host file '" + path + "' names no host");
    check_unique(hosts, path);
    return hosts;
}

std::vector<Placement> place_ranks(const std::vector<Host>& hosts, int nranks, int ppn) {
    int nhosts = static_cast<int>(hosts.size());
    auto slots_of = [&](const Host& h) {
        if (ppn > 0) return ppn;
        if (h.slots > 0) return h.slots;
        if (nranks == 0) return 1;
        return (nranks + nhosts - 1) / nhosts;
    };
    long capacity = 0;
    for (const auto& h : hosts) capacity += slots_of(h);
    if (nranks == 0) {
        if (capacity > kMaxSlots) throw BadUsage("more than 4096 ranks");
        nranks = static_cast<int>(capacity);
    }
    if (nranks > capacity) {
        throw BadUsage(std::to_string(nranks) + " ranks do not fit on " + std::to_string(nhosts) +
                       " host(s) with " + std::to_string(capacity) + " slot(s)" +
                       (ppn > 0 ? " (--ppn " + std::to_string(ppn) + ")" : ""));
    }
    std::vector<Placement> out;
    int next = 0;
    for (const auto& h : hosts) {
        if (next == nranks) break;
        int n = std::min(slots_of(h), nranks - next);
        out.push_back({h.name, next, n});
        next += n;
    }
    return out;
}

std::vector<std::string> launcher_argv(const std::string& launcher, const std::string& host,
                                       const std::vector<std::string>& command) {
    std::vector<std::string> argv;
    std::stringstream ss(launcher);
    bool substituted = false;
    for (std::string word; ss >> word;) {
        for (size_t at; (at = word.find("{host}")) != std::string::npos;) {
            word.replace(at, 6, host);
            substituted = true;
        }
        argv.push_back(word);
    }
    if (argv.empty()) throw BadUsage("--launcher-cmd is empty");
    if (!substituted) argv.push_back(host);
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
}

}  // namespace cclrun

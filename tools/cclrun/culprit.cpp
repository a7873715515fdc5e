#include "culprit.h"

#include <cctype>

#include "base/wait.h"

namespace cclrun {
namespace {

constexpr size_t kLinesLooked = 20;
constexpr size_t kQuoted = 200;

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The first "rank N" in `line` with N != own, as a whole word.
std::optional<int> other_rank(std::string_view line, int own) {
    constexpr std::string_view kWord = "rank ";
    for (size_t at = line.find(kWord); at != std::string_view::npos;
         at = line.find(kWord, at + 1)) {
        if (at > 0 && word_char(line[at - 1])) continue;  // "frank 3", "CCL_rank 3"
        size_t p = at + kWord.size(), end = p;
        while (end < line.size() && std::isdigit(static_cast<unsigned char>(line[end]))) ++end;
        if (end == p || end - p > 6 || (end < line.size() && word_char(line[end]))) continue;
        int n = std::stoi(std::string(line.substr(p, end - p)));
        if (n != own) return n;
    }
    return std::nullopt;
}

std::string trimmed(std::string_view line) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
        line.remove_suffix(1);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front())))
        line.remove_prefix(1);
    if (line.size() <= kQuoted) return std::string(line);
    return std::string(line.substr(0, kQuoted)) + "...";
}

}  // namespace

std::optional<NamedRank> rank_named_in(std::string_view text, int own) {
    size_t end = text.size(), looked = 0;
    while (end > 0 && looked < kLinesLooked) {
        size_t nl = text.rfind('\n', end - 1);
        size_t begin = nl == std::string_view::npos ? 0 : nl + 1;
        std::string_view line = text.substr(begin, end - begin);
        if (!trimmed(line).empty()) {
            ++looked;
            if (auto r = other_rank(line, own)) return NamedRank{*r, trimmed(line)};
        }
        if (begin == 0) break;
        end = begin - 1;
    }
    return std::nullopt;
}

bool is_stopped(pid_t pid) {
    const char state = ccl::process_state(pid);
    return state == 'T' || state == 't';
}

}  // namespace cclrun

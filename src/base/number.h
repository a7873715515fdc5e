// Numbers from text that people type (environment variables, launchers' settings), read
// strictly: decimal digits only, and one decimal point where a fraction is allowed. No sign,
// spaces, hex, octal, exponent or anything after: "5", "007", "0.25", never " 5", "+3", "-0",
// "0x10" or "1e3". None of these numbers is negative.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ccl {

// Whether `text` is one or more decimal digits and nothing else.
inline bool all_digits(std::string_view text) {
    return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

// One or more decimal digits; nullopt for anything else or a value past UINT64_MAX.
inline std::optional<uint64_t> parse_decimal(std::string_view text) {
    if (!all_digits(text)) return std::nullopt;
    uint64_t v = 0;
    for (char c : text) {
        const uint64_t d = uint64_t(c - '0');
        if (v > (UINT64_MAX - d) / 10) return std::nullopt;
        v = v * 10 + d;
    }
    return v;
}

// Digits, optionally followed by a decimal point and more digits ("2", "0.5"); nullopt else.
inline std::optional<double> parse_decimal_fraction(std::string_view text) {
    const size_t point = text.find('.');
    if (!all_digits(text.substr(0, point)) ||
        (point != std::string_view::npos && !all_digits(text.substr(point + 1))))
        return std::nullopt;
    double v = 0;
    const auto [end, ec] =
        std::from_chars(text.data(), text.data() + text.size(), v, std::chars_format::fixed);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return v;
}

}  // namespace ccl

#include "binding.h"

#include "hosts.h"

namespace cclrun {

const char* bind_name(Bind b) {
    switch (b) {
        case Bind::automatic: return "auto";
        case Bind::block: return "block";
        case Bind::core: return "core";
        case Bind::none: break;
    }
    return "none";
}

std::optional<Bind> bind_named(std::string_view name) {
    for (Bind b : {Bind::automatic, Bind::block, Bind::core, Bind::none})
        if (name == bind_name(b)) return b;
    return std::nullopt;
}

Bind parse_bind(const std::string& text) {
    std::optional<Bind> b = bind_named(text);
    if (!b || *b == Bind::automatic)
        throw BadUsage("--bind-to wants block, core or none, not '" + text + "'");
    return *b;
}

}  // namespace cclrun

// How cclrun binds its ranks: each on cores of its own (the cores themselves: ccl::core_sets in
// core/binding.h, which says why).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cclrun {

enum class Bind {
    automatic,  // block on this machine when the ranks fit, none with --hosts
    block,      // an equal share of the cores each (Intel MPI's default domains)
    core,       // one core each
    none,
};

// Its name ("auto", "block", "core", "none"; the job spec carries it so), and back (nullopt for
// any other name).
const char* bind_name(Bind b);
std::optional<Bind> bind_named(std::string_view name);

// --bind-to's value: "block", "core" or "none"; throws BadUsage otherwise.
Bind parse_bind(const std::string& text);

}  // namespace cclrun

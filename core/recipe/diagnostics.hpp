// The recipe parser's problem list (internal to core/recipe; no header outside it includes this).
//
// Diagnostics collects every problem found in one pass and orders them root causes first. Rules:
// - A consequence (a required key that is missing, a placeholder no sweep defines, a setting that
//   needs another one) is listed after every other problem: a misspelt key or a value of the wrong
//   type is usually why it happened, and the reader should see that first.
// - Within each group: files in the order their first problem was found, then by position.
// - Positions inside a `--set KEY` override (registered with add_override_source) have no line or
//   column: the source is the command line, and "line 1" would send the reader to the recipe.
// Not thread-safe: one Diagnostics per parse.
#pragma once

#include "core/util/result.hpp"

#include <toml++/toml.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::recipe::detail {

SourcePos to_pos(const toml::source_region& r);

class Diagnostics {
public:
    void add(const toml::source_region& where, std::string field, std::string message) {
        push(where, std::move(field), std::move(message), false);
    }
    void add(const toml::node& node, std::string field, std::string message) {
        add(node.source(), std::move(field), std::move(message));
    }
    void add_consequence(const toml::node& node, std::string field, std::string message) {
        push(node.source(), std::move(field), std::move(message), true);
    }
    void add_plain(std::string file, std::string field, std::string message, bool consequence = false);
    void add_override_source(std::string source) { m_override_sources.push_back(std::move(source)); }
    bool empty() const { return m_errors.empty(); }
    std::size_t count() const { return m_errors.size(); }

    // Every problem, ordered by the rules above, as one Error (the rest in Error::more). Not empty.
    Error take();

private:
    struct Problem {
        Error error{};
        bool consequence = false;
    };

    void push(const toml::source_region& where, std::string field, std::string message, bool consequence);

    std::vector<Problem> m_errors;
    std::vector<std::string> m_override_sources;
};

// "resources" + "gpu" -> "resources.gpu"; "" + "name" -> "name".
std::string join_field(const std::string& prefix, std::string_view key);

// A key that is not in its table's list but is near one that is (`sweeps` for `sweep`).
struct Misspelt {
    std::string meant{};
    const toml::node* value = nullptr;
};

// Flags keys of `table` that are not in `known`, with a suggestion; returns the keys that have one.
std::vector<Misspelt> check_keys(const toml::table& table, const std::vector<std::string>& known,
                                 const std::string& prefix, Diagnostics& diag);

} // namespace gpupool::recipe::detail

// resolve_name (resolve_name.hpp): an id or a name to the one id it means.
#include "core/coordinator/resolve_name.hpp"

#include "core/util/strings.hpp"

#include <algorithm>
#include <charconv>
#include <optional>

namespace gpupool::coordinator {

namespace {

std::optional<std::int64_t> as_id(const std::string& text) {
    std::int64_t v = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (text.empty() || ec != std::errc() || ptr != end || v <= 0) {
        return std::nullopt;
    }
    return v;
}

std::string described(const NamedCandidate& c) {
    return std::to_string(c.id) + (c.note.empty() ? "" : " (" + c.note + ")");
}

} // namespace

Result<std::int64_t> resolve_name(const std::string& kind, const std::string& text,
                                  const std::vector<NamedCandidate>& candidates, const std::string& field,
                                  const std::string& hint) {
    if (text.empty()) {
        return make_error(ErrorCode::invalid_input, "expected a " + kind + "'s id or name", field);
    }
    if (auto id = as_id(text)) {
        const bool exists =
            std::any_of(candidates.begin(), candidates.end(), [&](const NamedCandidate& c) { return c.id == *id; });
        if (exists) {
            return *id;
        }
    }
    std::vector<const NamedCandidate*> named;
    for (const auto& c : candidates) {
        if (c.name == text) {
            named.push_back(&c);
        }
    }
    if (named.size() == 1) {
        return named.front()->id;
    }
    if (named.size() > 1) {
        std::vector<std::string> ids;
        for (const NamedCandidate* c : named) {
            ids.push_back(described(*c));
        }
        return make_error(ErrorCode::invalid_input,
                          "`" + text + "` names " + std::to_string(named.size()) + " " + kind +
                              "s: " + util::join(ids, ", ") + "; give the id of the one you mean",
                          field);
    }
    std::string msg = as_id(text) ? "no " + kind + " " + text : "no " + kind + " named `" + text + "`";
    std::vector<std::string> names;
    for (const auto& c : candidates) {
        if (!c.name.empty()) {
            names.push_back(c.name);
        }
    }
    if (auto near = util::nearest(text, names)) {
        msg += "; did you mean `" + *near + "`?";
    }
    if (!hint.empty()) {
        msg += " (" + hint + ")";
    }
    return make_error(ErrorCode::not_found, msg, field);
}

} // namespace gpupool::coordinator

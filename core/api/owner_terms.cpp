#include "core/api/owner_terms.hpp"

#include "core/api/field_reader.hpp"
#include "core/recipe/field_rules.hpp"
#include "core/resources/quantity.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace gpupool::api {

using nlohmann::json;

namespace {

constexpr std::array<std::pair<SharingState, std::string_view>, 4> k_states{{
    {SharingState::sharing, "sharing"},
    {SharingState::paused, "paused"},
    {SharingState::outside_window, "outside_window"},
    {SharingState::reclaimed, "reclaimed"},
}};

std::vector<std::string> bounded_texts(FieldReader& r, const char* key) {
    auto out = r.texts(key, k_max_owner_entry_bytes);
    if (out.size() > k_max_owner_list) {
        r.fail("at most " + std::to_string(k_max_owner_list) + " entries", r.name(key));
        return {};
    }
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (recipe::has_control_character(out[i])) {
            r.fail("expected printable text (no control characters)", r.name(key) + "[" + std::to_string(i) + "]");
            return {};
        }
    }
    return out;
}

} // namespace

const char* to_string(SharingState state) {
    for (const auto& [s, name] : k_states) {
        if (s == state) {
            return name.data();
        }
    }
    return "?";
}

std::optional<SharingState> sharing_state_from_string(std::string_view name) {
    for (const auto& [s, n] : k_states) {
        if (n == name) {
            return s;
        }
    }
    return std::nullopt;
}

std::vector<std::string> describe_terms(const OwnerTerms& t) {
    const auto list = [](const std::vector<std::string>& items, const char* none) {
        std::string out;
        for (const auto& i : items) {
            out += (out.empty() ? "" : ", ") + i;
        }
        return items.empty() ? std::string(none) : out;
    };
    return {"hours: " + list(t.hours, "any time"), "teams: " + list(t.teams, "every team"),
            "registries: " + list(t.registries, "any"),
            "max jobs: " + (t.max_jobs > 0 ? std::to_string(t.max_jobs) : std::string("no cap")),
            "max runtime: " +
                (t.max_runtime_s > 0 ? resources::format_duration_s(t.max_runtime_s) : std::string("any"))};
}

Result<OwnerTerms> owner_terms_from_json(const json& j, const std::string& field) {
    FieldReader r(j, field);
    r.object();
    OwnerTerms t;
    t.max_runtime_s = r.integer("max_runtime_s", 0, resources::k_max_duration_s, 0);
    t.teams = bounded_texts(r, "teams");
    t.registries = bounded_texts(r, "registries");
    t.hours = bounded_texts(r, "hours");
    t.max_jobs = r.integer("max_jobs", 0, 1'000'000, 0);
    if (r.error()) {
        return *r.error();
    }
    return t;
}

json to_json(const OwnerTerms& t) {
    return {{"max_runtime_s", t.max_runtime_s},
            {"teams", t.teams},
            {"registries", t.registries},
            {"hours", t.hours},
            {"max_jobs", t.max_jobs}};
}

std::optional<std::string> outside_terms(const OwnerTerms& terms, std::string_view team, std::string_view image,
                                         std::int64_t max_runtime_s) {
    if (!terms.teams.empty() && std::find(terms.teams.begin(), terms.teams.end(), team) == terms.teams.end()) {
        return "the owner takes no jobs of team `" + std::string(team) + "`";
    }
    if (!terms.registries.empty()) {
        const std::string full = qualified_image(image);
        const bool allowed = std::any_of(terms.registries.begin(), terms.registries.end(),
                                         [&](const std::string& p) { return full.starts_with(p); });
        if (!allowed) {
            return "the owner takes no images from there (`" + full + "`)";
        }
    }
    if (terms.max_runtime_s > 0 && (max_runtime_s <= 0 || max_runtime_s > terms.max_runtime_s)) {
        return "the owner takes jobs of at most " + resources::format_duration_s(terms.max_runtime_s) +
               " (this one may run " +
               (max_runtime_s <= 0 ? std::string("without a limit") : resources::format_duration_s(max_runtime_s)) +
               ")";
    }
    return std::nullopt;
}

} // namespace gpupool::api

// The comparison of two runs' results (compare.hpp). Everything in a RunResult may have been chosen by
// a lying worker: the evidence's shape is checked before use (a wrong shape is a difference, never an
// exception), JSON texts are parsed with their nesting bounded while parsing, and every piece of a
// `detail` taken from the inputs is made printable and short.
#include "core/verify/compare.hpp"

#include "core/util/result.hpp"
#include "core/util/strings.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <fnmatch.h>
#include <map>
#include <string_view>
#include <utility>

namespace gpupool::verify {

namespace {

using Json = nlohmann::json;

constexpr std::size_t k_max_detail = 200; // a detail's bytes, before the "..." of a cut
// Its parts' shares of it: "<file>: $<json path>: <value> vs <value>" fits.
constexpr std::size_t k_max_path = 60;      // a file's path
constexpr std::size_t k_max_json_path = 60; // a JSON path ("$.scores[2]")
constexpr std::size_t k_max_key = 32;       // one object key within a JSON path
constexpr std::size_t k_max_value = 30;     // one value
constexpr std::size_t k_digest_shown = 12;  // hex digits of a SHA-256

// The first `max` bytes of `s`, or fewer: never part of a UTF-8 character.
std::string_view cut_at_character(std::string_view s, std::size_t max) {
    if (s.size() <= max) {
        return s;
    }
    std::size_t end = max;
    for (int back = 0; back < 3 && end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0u) == 0x80u; ++back) {
        --end;
    }
    return s.substr(0, end);
}

// `s` fit for a detail: control characters and bytes that are not UTF-8 escaped (util::escape_control),
// at most `max` bytes of it kept, "..." marking a cut.
std::string printable(std::string_view s, std::size_t max) {
    const std::string_view head = cut_at_character(s, max);
    std::string out = util::escape_control(head);
    if (head.size() == s.size() && out.size() <= max) {
        return out;
    }
    out.resize(cut_at_character(out, max).size());
    return out + "...";
}

Comparison agree(const std::string& detail) {
    return {true, printable(detail, k_max_detail)};
}
Comparison differ(const std::string& detail) {
    return {false, printable(detail, k_max_detail)};
}

std::string shown_path(const std::string& path) {
    return printable(path, k_max_path);
}

std::string shown_digest(const std::string& hex) {
    return printable(hex.substr(0, k_digest_shown), k_digest_shown);
}

// A double as JSON writes it (the shortest text that reads back the same), or nan / inf / -inf.
std::string number_text(double d) {
    if (std::isnan(d)) {
        return "nan";
    }
    if (std::isinf(d)) {
        return d > 0 ? "inf" : "-inf";
    }
    return Json(d).dump();
}

// One JSON value as a detail shows it: scalars as written (cut), containers by their size.
std::string value_text(const Json& v) {
    if (v.is_array()) {
        return "an array of " + std::to_string(v.size());
    }
    if (v.is_object()) {
        return "an object of " + std::to_string(v.size());
    }
    if (v.is_number_float()) {
        return number_text(v.get<double>());
    }
    return printable(v.dump(-1, ' ', false, Json::error_handler_t::replace), k_max_value);
}

// ---- JSON values ----

// Where two values first differ: the path from the value compared down ("[2]", ".scores[2]") and what.
struct Difference {
    std::string path;
    std::string what;
};

// "$.scores[2]: 0.51 vs 0.93": a long path cut, not what differs.
std::string json_where(const Difference& diff) {
    return printable("$" + diff.path, k_max_json_path) + ": " + diff.what;
}

bool integers_equal(const Json& a, const Json& b) {
    if (a.is_number_unsigned() && b.is_number_unsigned()) {
        return a.get<std::uint64_t>() == b.get<std::uint64_t>();
    }
    if (!a.is_number_unsigned() && !b.is_number_unsigned()) {
        return a.get<std::int64_t>() == b.get<std::int64_t>();
    }
    const Json& s = a.is_number_unsigned() ? b : a;
    const Json& u = a.is_number_unsigned() ? a : b;
    const auto signed_value = s.get<std::int64_t>();
    return signed_value >= 0 && static_cast<std::uint64_t>(signed_value) == u.get<std::uint64_t>();
}

// Numbers, integer or not, compared as doubles: |a - b| <= tolerance x max(1, |a|, |b|). Two integers
// are compared exactly first (a double cannot tell 2^63 from 2^63 + 1), and tolerance 0 stops there.
// NaN equals only NaN; an infinity only the same infinity.
bool numbers_close(const Json& a, const Json& b, double tolerance) {
    if (a.is_number_integer() && b.is_number_integer()) {
        if (integers_equal(a, b)) {
            return true;
        }
        if (tolerance == 0.0) {
            return false;
        }
    }
    const double x = a.get<double>();
    const double y = b.get<double>();
    if (std::isnan(x) || std::isnan(y)) {
        return std::isnan(x) && std::isnan(y);
    }
    if (std::isinf(x) || std::isinf(y)) {
        return x == y;
    }
    if (x == y) {
        return true;
    }
    return std::fabs(x - y) <= tolerance * std::max({1.0, std::fabs(x), std::fabs(y)});
}

// The first member key of `x` that `y` lacks, in key order.
const std::string* key_missing(const Json& x, const Json& y) {
    for (auto it = x.begin(); it != x.end(); ++it) {
        if (y.find(it.key()) == y.end()) {
            return &it.key();
        }
    }
    return nullptr;
}

// json_close at nesting `level` (1 for the values compared); the recursion stops at
// k_max_compare_depth, so a hostile value cannot take the stack.
bool close_at(const Json& a, const Json& b, double tolerance, std::size_t level, Difference* diff) {
    const auto note = [diff](std::string what) {
        if (diff != nullptr) {
            diff->what = std::move(what);
        }
        return false;
    };
    if (a.is_number() && b.is_number()) {
        return numbers_close(a, b, tolerance) || note(value_text(a) + " vs " + value_text(b));
    }
    if (a.type() != b.type()) {
        return note(std::string(a.type_name()) + " vs " + b.type_name());
    }
    if (a.is_structured() && level > k_max_compare_depth) {
        return note("nested deeper than " + std::to_string(k_max_compare_depth));
    }
    if (a.is_array()) {
        if (a.size() != b.size()) {
            return note(value_text(a) + " vs " + value_text(b));
        }
        for (std::size_t i = 0; i < a.size(); ++i) {
            if (!close_at(a[i], b[i], tolerance, level + 1, diff)) {
                if (diff != nullptr) {
                    diff->path.insert(0, "[" + std::to_string(i) + "]");
                }
                return false;
            }
        }
        return true;
    }
    if (a.is_object()) {
        if (const std::string* key = key_missing(a, b)) {
            return note("key \"" + printable(*key, k_max_key) + "\" only in the first");
        }
        if (const std::string* key = key_missing(b, a)) {
            return note("key \"" + printable(*key, k_max_key) + "\" only in the second");
        }
        for (auto it = a.begin(); it != a.end(); ++it) {
            if (!close_at(it.value(), *b.find(it.key()), tolerance, level + 1, diff)) {
                if (diff != nullptr) {
                    diff->path.insert(0, "." + printable(it.key(), k_max_key));
                }
                return false;
            }
        }
        return true;
    }
    // Strings, booleans, null (and, from a caller's own values, binary): equal or not.
    return a == b || note(value_text(a) + " vs " + value_text(b));
}

// A JSON text parsed with its nesting bounded while parsing (nlohmann's parser keeps its own stack,
// not the call stack, and the callback drops every container below the bound), or why it was not.
struct ParsedText {
    Json value;
    std::string error; // empty: parsed
};

ParsedText parse_bounded(const std::string& text) {
    bool too_deep = false;
    const Json::parser_callback_t bound = [&too_deep](int depth, Json::parse_event_t event, Json&) {
        const bool opens = event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start;
        if (opens && static_cast<std::size_t>(depth) >= k_max_compare_depth) {
            too_deep = true;
            return false;
        }
        return true;
    };
    ParsedText out;
    out.value = Json::parse(text, bound, /*allow_exceptions=*/false);
    if (out.value.is_discarded()) {
        out.error = "not valid JSON";
    } else if (too_deep) {
        out.error = "nested deeper than " + std::to_string(k_max_compare_depth);
    }
    if (!out.error.empty()) {
        out.value = nullptr;
    }
    return out;
}

// ---- the evidence ----

// One entry of a listing's JSON: its type and what identifies its content (a file's SHA-256, a
// link's target, nothing for the rest).
struct Listed {
    std::string type;
    std::string content;
};

struct Outputs {
    std::string tree_sha256;
    bool truncated = false;
    std::map<std::string, Listed> entries;
};

// A string member of `j`, or nullptr when it is missing or not a string.
const std::string* string_member(const Json& j, const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get_ptr<const std::string*>() : nullptr;
}

// One side's `outputs` (archive::to_json of its listing), not null.
Result<Outputs> read_outputs(const Json& j, const std::string& side) {
    const auto malformed = [&side](const std::string& what) {
        return make_error(ErrorCode::invalid_input, "malformed evidence: the " + side + " result's outputs " + what);
    };
    if (!j.is_object()) {
        return malformed("are not an object");
    }
    Outputs out;
    const std::string* tree = string_member(j, "tree_sha256");
    if (tree == nullptr) {
        return malformed("have no tree_sha256 string");
    }
    out.tree_sha256 = *tree;
    const auto truncated = j.find("truncated");
    if (truncated == j.end() || !truncated->is_boolean()) {
        return malformed("have no truncated boolean");
    }
    out.truncated = truncated->get<bool>();
    const auto entries = j.find("entries");
    if (entries == j.end() || !entries->is_array()) {
        return malformed("have no entries array");
    }
    for (const auto& e : *entries) {
        const std::string* path = e.is_object() ? string_member(e, "path") : nullptr;
        const std::string* type = path != nullptr ? string_member(e, "type") : nullptr;
        if (type == nullptr) {
            return malformed("list an entry without a path and a type");
        }
        const std::string* content = nullptr;
        if (*type == "file") {
            content = string_member(e, "sha256");
        } else if (*type == "link") {
            content = string_member(e, "target");
        }
        if (content == nullptr && (*type == "file" || *type == "link")) {
            return malformed("list " + shown_path(*path) + " without its " + (*type == "file" ? "sha256" : "target"));
        }
        Listed item{*type, content != nullptr ? *content : std::string()};
        if (!out.entries.emplace(*path, std::move(item)).second) {
            return malformed("list " + shown_path(*path) + " twice");
        }
    }
    return out;
}

// One side's `json_files` ({"files": {path: text}, "skipped": [path]}, each member optional): the
// texts by path, pointing into `j`. Null: none kept.
Result<std::map<std::string, const std::string*>> read_json_files(const Json& j, const std::string& side) {
    const auto malformed = [&side](const std::string& what) {
        return make_error(ErrorCode::invalid_input, "malformed evidence: the " + side + " result's json_files " + what);
    };
    std::map<std::string, const std::string*> out;
    if (j.is_null()) {
        return out;
    }
    if (!j.is_object()) {
        return malformed("are not an object");
    }
    if (const auto files = j.find("files"); files != j.end()) {
        if (!files->is_object()) {
            return malformed("have files that are not an object");
        }
        for (const auto& [path, text] : files->items()) {
            if (!text.is_string()) {
                return malformed("hold " + shown_path(path) + " as something other than a text");
            }
            out.emplace(path, text.get_ptr<const std::string*>());
        }
    }
    if (const auto skipped = j.find("skipped"); skipped != j.end()) {
        if (!skipped->is_array() ||
            !std::all_of(skipped->begin(), skipped->end(), [](const Json& p) { return p.is_string(); })) {
            return malformed("have skipped that is not an array of paths");
        }
    }
    return out;
}

// A negative or NaN tolerance is 0 (the recipe refuses both; callers of json_close may not).
double usable_tolerance(double tolerance) {
    return tolerance >= 0.0 ? tolerance : 0.0;
}

std::string exit_text(const std::optional<std::int64_t>& code) {
    return code ? "exit " + std::to_string(*code) : std::string("no exit status");
}

// Whether the rule compares `path`: a `files` pattern matches it, or with none, json compares the
// `*.json` files and exact every file.
bool compared(const recipe::Verify& rule, const std::string& path) {
    if (rule.files.empty()) {
        return rule.compare != recipe::CompareMode::json ||
               (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0);
    }
    return std::any_of(rule.files.begin(), rule.files.end(), [&path](const std::string& pattern) {
        return ::fnmatch(pattern.c_str(), path.c_str(), FNM_PATHNAME) == 0;
    });
}

// How two listed copies of one path differ by what the listings say of them, or nullopt.
std::optional<std::string> listed_difference(const std::string& path, const Listed& x, const Listed& y) {
    if (x.type != y.type) {
        return shown_path(path) + ": " + printable(x.type, k_max_value) + " vs " + printable(y.type, k_max_value);
    }
    if (x.content == y.content) {
        return std::nullopt;
    }
    if (x.type == "link") {
        return shown_path(path) + ": a link to " + printable(x.content, k_max_value) + " vs to " +
               printable(y.content, k_max_value);
    }
    return shown_path(path) + ": contents differ (sha256 " + shown_digest(x.content) + " vs " +
           shown_digest(y.content) + ")";
}

// How two copies of a path json compares differ, or nullopt: by value when both texts were kept and
// parse; `by_digest` counts the files compared by SHA-256 instead (a text not kept, or neither parsing).
std::optional<std::string> json_difference(const std::string& path, const Listed& x, const Listed& y,
                                           const std::string* text_x, const std::string* text_y, double tolerance,
                                           int& by_digest) {
    if (x.type != "file" || y.type != "file" || text_x == nullptr || text_y == nullptr) {
        by_digest += x.type == "file" && y.type == "file" ? 1 : 0;
        return listed_difference(path, x, y);
    }
    const ParsedText px = parse_bounded(*text_x);
    const ParsedText py = parse_bounded(*text_y);
    if (!px.error.empty() && !py.error.empty()) {
        // Neither has a value to compare: the same bytes agree, as exact would say.
        ++by_digest;
        return listed_difference(path, x, y);
    }
    if (!px.error.empty() || !py.error.empty()) {
        const bool first = !px.error.empty();
        return shown_path(path) + ": " + (first ? px.error : py.error) + " in the " + (first ? "first" : "second") +
               " result";
    }
    Difference diff;
    if (close_at(px.value, py.value, tolerance, 1, &diff)) {
        return std::nullopt;
    }
    return shown_path(path) + ": " + json_where(diff);
}

Comparison compare_checked(const recipe::Verify& rule, const RunResult& a, const RunResult& b) {
    if (rule.compare == recipe::CompareMode::none) {
        return agree("not compared (verify: none)");
    }
    if (a.exit_code != b.exit_code) {
        return differ("exit status: " + exit_text(a.exit_code) + " vs " + exit_text(b.exit_code));
    }
    const std::string exit = exit_text(a.exit_code);
    if (a.outputs.is_null() && b.outputs.is_null()) {
        return agree(exit + "; no outputs on either side");
    }
    if (a.outputs.is_null() || b.outputs.is_null()) {
        return differ(exit + "; outputs only in the " + (a.outputs.is_null() ? "second" : "first") + " result");
    }
    auto oa = read_outputs(a.outputs, "first");
    if (!oa) {
        return differ(oa.error().message);
    }
    auto ob = read_outputs(b.outputs, "second");
    if (!ob) {
        return differ(ob.error().message);
    }
    const bool truncated = oa->truncated || ob->truncated;
    if (truncated || (rule.compare == recipe::CompareMode::exact && rule.files.empty())) {
        const std::string why = truncated ? " (a listing was truncated: the whole tree compared)" : "";
        if (oa->tree_sha256 != ob->tree_sha256) {
            return differ("outputs differ (tree sha256 " + shown_digest(oa->tree_sha256) + " vs " +
                          shown_digest(ob->tree_sha256) + ")" + why);
        }
        return agree(exit + "; outputs equal (tree sha256 " + shown_digest(oa->tree_sha256) + ")" + why);
    }
    const bool json = rule.compare == recipe::CompareMode::json;
    std::map<std::string, const std::string*> texts_a;
    std::map<std::string, const std::string*> texts_b;
    if (json) {
        auto ta = read_json_files(a.json_files, "first");
        if (!ta) {
            return differ(ta.error().message);
        }
        auto tb = read_json_files(b.json_files, "second");
        if (!tb) {
            return differ(tb.error().message);
        }
        texts_a = std::move(*ta);
        texts_b = std::move(*tb);
    }
    const auto text_of = [](const std::map<std::string, const std::string*>& texts, const std::string& path) {
        const auto it = texts.find(path);
        return it != texts.end() ? it->second : nullptr;
    };
    // Every compared path of either side, in path order: the first difference is the same whichever
    // side lists more.
    std::map<std::string, std::pair<const Listed*, const Listed*>> paths;
    for (const auto& [path, item] : oa->entries) {
        if (compared(rule, path)) {
            paths[path].first = &item;
        }
    }
    for (const auto& [path, item] : ob->entries) {
        if (compared(rule, path)) {
            paths[path].second = &item;
        }
    }
    const double tolerance = usable_tolerance(rule.tolerance);
    int by_digest = 0;
    for (const auto& [path, pair] : paths) {
        const auto [x, y] = pair;
        if (x == nullptr || y == nullptr) {
            return differ(shown_path(path) + ": only in the " + (x != nullptr ? "first" : "second") + " result");
        }
        const auto diff =
            json ? json_difference(path, *x, *y, text_of(texts_a, path), text_of(texts_b, path), tolerance, by_digest)
                 : listed_difference(path, *x, *y);
        if (diff) {
            return differ(*diff);
        }
    }
    const std::string count = std::to_string(paths.size());
    if (paths.empty()) {
        return agree(exit + (json ? "; no JSON files to compare" : "; no output matches the verify files"));
    }
    if (!json) {
        return agree(exit + "; " + count + " files equal");
    }
    return agree(exit + "; " + count + " JSON files within " + number_text(tolerance) +
                 (by_digest > 0 ? " (" + std::to_string(by_digest) + " by SHA-256)" : ""));
}

} // namespace

Comparison compare_results(const recipe::Verify& rule, const RunResult& a, const RunResult& b) {
    try {
        return compare_checked(rule, a, b);
    } catch (const std::exception& e) {
        // Not expected (the evidence's shape is checked before use), but hostile input must not escape as
        // an exception: no verdict of agreement without a finished comparison.
        return differ(std::string("could not compare: ") + e.what());
    }
}

bool json_close(const nlohmann::json& a, const nlohmann::json& b, double tolerance, std::string* where) {
    try {
        Difference diff;
        if (close_at(a, b, usable_tolerance(tolerance), 1, where != nullptr ? &diff : nullptr)) {
            return true;
        }
        if (where != nullptr) {
            *where = printable(json_where(diff), k_max_detail);
        }
    } catch (const std::exception& e) {
        if (where != nullptr) {
            *where = printable(std::string("$: could not compare: ") + e.what(), k_max_detail);
        }
    }
    return false;
}

} // namespace gpupool::verify

// verify::compare_results: how a spot check compares two runs' results (docs/evidence.md): the exit
// statuses, then the outputs by the recipe's `[verify]` rule (exact digests, JSON values within a
// tolerance, or nothing), with hostile evidence a difference and never a throw.
#include "core/archive/listing.hpp"
#include "core/util/sha256.hpp"
#include "core/verify/compare.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {
namespace test_compare {

using namespace gpupool;
using nlohmann::json;
using recipe::CompareMode;
using verify::compare_results;
using verify::json_close;
using verify::RunResult;

// A run that ended with `exit` leaving `files` (path -> contents; a value "->target" is a symlink),
// as the coordinator records it: the listing's JSON (its tree digest computed as list_archive_file
// computes it) and the texts of every `*.json` file.
RunResult run(const std::map<std::string, std::string>& files, std::optional<std::int64_t> exit = 0) {
    archive::Listing l;
    util::Sha256 tree;
    for (const auto& [path, content] : files) {
        archive::ListedEntry e;
        e.path = path;
        if (content.rfind("->", 0) == 0) {
            e.type = "link";
            e.target = content.substr(2);
        } else {
            e.type = "file";
            e.size = static_cast<std::int64_t>(content.size());
            e.sha256 = util::sha256_hex(content);
            l.file_bytes += e.size;
            if (path.size() > 5 && path.substr(path.size() - 5) == ".json") {
                l.json_texts[path] = content;
            }
        }
        tree.update(e.path + std::string(1, '\0') + e.type + std::string(1, '\0') +
                    (e.type == "link" ? e.target : e.sha256) + "\n");
        l.entries.push_back(e);
    }
    l.entry_count = static_cast<std::int64_t>(l.entries.size());
    l.tree_sha256 = tree.hex();
    RunResult r;
    r.exit_code = exit;
    r.outputs = archive::to_json(l);
    r.json_files = {{"files", l.json_texts}, {"skipped", l.json_skipped}};
    return r;
}

// `path`'s text as a file too large to keep: listed, its text not in json_files but in "skipped".
RunResult& skip(RunResult& r, const std::string& path) {
    r.json_files["files"].erase(path);
    r.json_files["skipped"].push_back(path);
    return r;
}

// The listing cut to its first `kept` entries, as list_archive_file cuts one past max_listed.
RunResult& truncate(RunResult& r, std::size_t kept) {
    auto& entries = r.outputs["entries"];
    entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(kept), entries.end());
    r.outputs["truncated"] = true;
    return r;
}

recipe::Verify rule(CompareMode mode, double tolerance = 0.0, std::vector<std::string> files = {}) {
    return recipe::Verify{mode, tolerance, std::move(files)};
}

// json_close of two texts, the difference's place in `where`.
bool close_texts(const std::string& a, const std::string& b, double tolerance, std::string* where = nullptr) {
    return json_close(json::parse(a), json::parse(b), tolerance, where);
}

std::string nested_arrays(std::size_t depth) {
    return std::string(depth, '[') + std::string(depth, ']');
}

TEST_CASE("compare: different exit statuses differ whatever the outputs", "[verify][evidence]") {
    const std::map<std::string, std::string> files{{"out.bin", "same"}};
    for (const auto mode : {CompareMode::exact, CompareMode::json}) {
        INFO(static_cast<int>(mode));
        auto c = compare_results(rule(mode), run(files, 0), run(files, 1));
        CHECK_FALSE(c.agree);
        CHECK(c.detail == "exit status: exit 0 vs exit 1");
        c = compare_results(rule(mode), run(files, std::nullopt), run(files, 0));
        CHECK_FALSE(c.agree);
        CHECK(c.detail == "exit status: no exit status vs exit 0");
        // Both absent counts as equal.
        CHECK(compare_results(rule(mode), run(files, std::nullopt), run(files, std::nullopt)).agree);
    }
}

TEST_CASE("compare exact: the whole tree's digest decides", "[verify][evidence]") {
    const auto a = run({{"model.bin", "weights"}, {"log.txt", "took 3 s"}});
    const auto same = run({{"model.bin", "weights"}, {"log.txt", "took 3 s"}});
    const auto other = run({{"model.bin", "weights"}, {"log.txt", "took 4 s"}});
    const auto c = compare_results(rule(CompareMode::exact), a, same);
    CHECK(c.agree);
    CHECK(c.detail.rfind("exit 0; outputs equal (tree sha256 ", 0) == 0);
    const auto d = compare_results(rule(CompareMode::exact), a, other);
    CHECK_FALSE(d.agree);
    CHECK(d.detail.rfind("outputs differ (tree sha256 ", 0) == 0);
}

TEST_CASE("compare: no outputs on both sides agree and on one side differ", "[verify][evidence]") {
    RunResult none_a;
    none_a.exit_code = 0;
    RunResult none_b = none_a;
    const auto some = run({{"results.json", "{}"}});
    for (const auto& r :
         {rule(CompareMode::exact), rule(CompareMode::json, 0.01), rule(CompareMode::exact, 0.0, {"*.json"})}) {
        INFO(static_cast<int>(r.compare));
        const auto c = compare_results(r, none_a, none_b);
        CHECK(c.agree);
        CHECK(c.detail == "exit 0; no outputs on either side");
        const auto d = compare_results(r, none_a, some);
        CHECK_FALSE(d.agree);
        CHECK(d.detail == "exit 0; outputs only in the second result");
        CHECK_FALSE(compare_results(r, some, none_b).agree);
    }
}

TEST_CASE("compare exact with files: only the matching files count", "[verify][evidence]") {
    const auto r = rule(CompareMode::exact, 0.0, {"*.bin", "sub/*.txt", "latest"});
    const std::map<std::string, std::string> base{{"model.bin", "w"}, {"sub/a.txt", "a"}, {"log.txt", "1 s"},
                                                  {"sub/x.bin", "x"}, {"latest", "->v1"}, {"notes", "n"}};
    auto changed = [&base](const std::string& path, const std::string& content) {
        auto files = base;
        files[path] = content;
        return run(files);
    };
    const auto c = compare_results(r, run(base), run(base));
    CHECK(c.agree);
    CHECK(c.detail == "exit 0; 3 files equal"); // model.bin, sub/a.txt, latest

    // Not matched: another file, and "*.bin" does not reach into sub/ (FNM_PATHNAME).
    CHECK(compare_results(r, run(base), changed("log.txt", "2 s")).agree);
    CHECK(compare_results(r, run(base), changed("sub/x.bin", "y")).agree);

    const auto d = compare_results(r, run(base), changed("sub/a.txt", "b"));
    CHECK_FALSE(d.agree);
    CHECK(d.detail.rfind("sub/a.txt: contents differ (sha256 ", 0) == 0);

    auto fewer = base;
    fewer.erase("model.bin");
    const auto m = compare_results(r, run(base), run(fewer));
    CHECK_FALSE(m.agree);
    CHECK(m.detail == "model.bin: only in the first result");

    const auto l = compare_results(r, run(base), changed("latest", "->v2"));
    CHECK_FALSE(l.agree);
    CHECK(l.detail == "latest: a link to v1 vs to v2");
    const auto t = compare_results(r, run(base), changed("latest", "v1"));
    CHECK_FALSE(t.agree);
    CHECK(t.detail == "latest: link vs file");

    // A pattern that matches nothing on either side is nothing to compare, not a difference.
    const auto none = compare_results(rule(CompareMode::exact, 0.0, {"*.h5"}), run(base), run(base));
    CHECK(none.agree);
    CHECK(none.detail == "exit 0; no output matches the verify files");
}

TEST_CASE("compare: a truncated listing falls back to the tree digest", "[verify][evidence]") {
    const auto r = rule(CompareMode::exact, 0.0, {"a.bin"});
    const std::map<std::string, std::string> files{{"a.bin", "same"}, {"b.bin", "one"}};
    auto other = files;
    other["b.bin"] = "two"; // not a listed file, and cut from the listing below
    auto a = run(files);
    auto b = run(other);
    REQUIRE(compare_results(r, a, b).agree); // uncut: only a.bin counts
    truncate(a, 1);
    truncate(b, 1);
    const auto c = compare_results(r, a, b);
    CHECK_FALSE(c.agree);
    CHECK(c.detail.find("a listing was truncated") != std::string::npos);
    auto same = run(files);
    truncate(same, 1);
    CHECK(compare_results(r, a, same).agree);
    // json too: the listing no longer says which files there are.
    CHECK_FALSE(compare_results(rule(CompareMode::json, 0.1), a, b).agree);
}

TEST_CASE("compare json: numbers within the tolerance agree", "[verify][evidence]") {
    const auto a = run({{"results.json", R"({"loss": 0.5000, "steps": 100})"}, {"log.txt", "gpu 0"}});
    const auto b = run({{"results.json", R"({"steps": 100, "loss": 0.5004})"}, {"log.txt", "gpu 1"}});
    const auto c = compare_results(rule(CompareMode::json, 1e-3), a, b);
    CHECK(c.agree);
    CHECK(c.detail == "exit 0; 1 JSON files within 0.001");
    // |0.5004 - 0.5| = 4e-4 > 1e-4 x max(1, 0.5004)
    CHECK_FALSE(compare_results(rule(CompareMode::json, 1e-4), a, b).agree);
    // The bytes differ: exact would not agree.
    CHECK_FALSE(compare_results(rule(CompareMode::exact), a, b).agree);
}

TEST_CASE("compare json: a difference names the file and the JSON path", "[verify][evidence]") {
    const auto a = run({{"eval/results.json", R"({"scores": [0.1, 0.2, 0.51], "name": "x"})"}});
    const auto b = run({{"eval/results.json", R"({"scores": [0.1, 0.2, 0.93], "name": "x"})"}});
    const auto c = compare_results(rule(CompareMode::json, 1e-3), a, b);
    CHECK_FALSE(c.agree);
    CHECK(c.detail == "eval/results.json: $.scores[2]: 0.51 vs 0.93");
}

TEST_CASE("compare json: the first difference in path order of files", "[verify][evidence]") {
    const auto a = run({{"a.json", "1"}, {"b.json", "2"}, {"c.json", "3"}});
    const auto b = run({{"a.json", "1"}, {"b.json", "5"}, {"c.json", "7"}});
    const auto c = compare_results(rule(CompareMode::json, 0.0), a, b);
    CHECK_FALSE(c.agree);
    CHECK(c.detail == "b.json: $: 2 vs 5");
    const auto missing = compare_results(rule(CompareMode::json, 0.0), a, run({{"a.json", "1"}, {"c.json", "3"}}));
    CHECK_FALSE(missing.agree);
    CHECK(missing.detail == "b.json: only in the first result");
}

TEST_CASE("json_close: an integer and a float of the same value agree", "[verify]") {
    CHECK(close_texts("1", "1.0", 0.0));
    CHECK(close_texts(R"({"n": [1, 2.0, -3]})", R"({"n": [1.0, 2, -3.0]})", 0.0));
    CHECK(compare_results(rule(CompareMode::json, 0.0), run({{"r.json", R"({"n": 1})"}}),
                          run({{"r.json", R"({"n": 1.0})"}}))
              .agree);
}

TEST_CASE("json_close: different keys or lengths or types differ", "[verify]") {
    struct Case {
        const char* a;
        const char* b;
        const char* where;
    };
    const Case cases[] = {
        {R"({"a": 1, "b": 2})", R"({"a": 1, "c": 2})", R"($: key "b" only in the first)"},
        {R"({"a": 1})", R"({"a": 1, "z": 2})", R"($: key "z" only in the second)"},
        {R"({"a": [1, 2, 3]})", R"({"a": [1, 2]})", "$.a: an array of 3 vs an array of 2"},
        {R"({"a": {"b": [true]}})", R"({"a": {"b": [1]}})", "$.a.b[0]: boolean vs number"},
        {R"([null])", R"([0])", "$[0]: null vs number"},
        {R"(["1"])", R"([1])", "$[0]: string vs number"},
        {R"({"s": "cat"})", R"({"s": "dog"})", R"($.s: "cat" vs "dog")"},
        {R"([[1], {}])", R"([[1], []])", "$[1]: object vs array"},
        {R"(true)", R"(false)", "$: true vs false"},
    };
    for (const auto& c : cases) {
        INFO(c.a << " vs " << c.b);
        std::string where;
        CHECK_FALSE(close_texts(c.a, c.b, 0.5, &where));
        CHECK(where == c.where);
        CHECK(close_texts(c.a, c.a, 0.0));
    }
}

TEST_CASE("json_close: tolerance 0 requires exact numbers", "[verify]") {
    CHECK(close_texts("0.5", "0.5", 0.0));
    CHECK_FALSE(close_texts("0.5", "0.5000001", 0.0));
    CHECK(close_texts("0.5", "0.5000001", 1e-6));
    // Integers beyond a double's 53 bits are still told apart.
    CHECK_FALSE(close_texts("9007199254740993", "9007199254740992", 0.0));
    CHECK_FALSE(close_texts("18446744073709551615", "18446744073709551614", 0.0));
    CHECK(close_texts("18446744073709551615", "18446744073709551615", 0.0));
    CHECK_FALSE(close_texts("-1", "18446744073709551615", 0.0));
    // Relative above 1, absolute below: |a - b| <= t x max(1, |a|, |b|).
    CHECK(close_texts("1000", "1001", 1e-3));
    CHECK_FALSE(close_texts("1000", "1002", 1e-3));
    CHECK(close_texts("0.0001", "0.0009", 1e-3));
    CHECK_FALSE(close_texts("0.0001", "0.0012", 1e-3));
    // A negative tolerance is 0.
    CHECK_FALSE(close_texts("1", "1.0000001", -1.0));
}

TEST_CASE("json_close: NaN equals only NaN and an infinity only itself", "[verify]") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    CHECK(json_close(json(nan), json(nan), 0.0));
    CHECK_FALSE(json_close(json(nan), json(1.0), 1.0));
    CHECK_FALSE(json_close(json(1.0), json(nan), 1.0));
    CHECK(json_close(json(inf), json(inf), 0.0));
    CHECK_FALSE(json_close(json(inf), json(-inf), 1.0));
    CHECK_FALSE(json_close(json(inf), json(1e308), 1.0));
    std::string where;
    CHECK_FALSE(json_close(json::array({-inf}), json::array({nan}), 0.0, &where));
    CHECK(where == "$[0]: -inf vs nan");
    // A text cannot say infinity: 1e999 overflows, which is not valid JSON (nlohmann's reading).
    const auto c =
        compare_results(rule(CompareMode::json, 1.0), run({{"r.json", "[1e999]"}}), run({{"r.json", "[1]"}}));
    CHECK_FALSE(c.agree);
    CHECK(c.detail == "r.json: not valid JSON in the first result");
}

TEST_CASE("compare json: a file too large to keep is compared by its SHA-256", "[verify][evidence]") {
    auto a = run({{"big.json", "[0.5000]"}, {"small.json", "[1.0]"}});
    auto same = run({{"big.json", "[0.5000]"}, {"small.json", "[1]"}});
    auto close = run({{"big.json", "[0.5001]"}, {"small.json", "[1]"}});
    skip(a, "big.json");
    skip(same, "big.json");
    const auto c = compare_results(rule(CompareMode::json, 1e-3), a, same);
    CHECK(c.agree);
    CHECK(c.detail == "exit 0; 2 JSON files within 0.001 (1 by SHA-256)");
    // Within the tolerance by value, but its text was not kept on one side: the bytes decide.
    const auto d = compare_results(rule(CompareMode::json, 1e-3), a, close);
    CHECK_FALSE(d.agree);
    CHECK(d.detail.rfind("big.json: contents differ (sha256 ", 0) == 0);
}

TEST_CASE("compare json: files other than JSON are ignored unless listed", "[verify][evidence]") {
    const auto a = run({{"r.json", "[1]"}, {"log.txt", "a"}, {"model.bin", "w1"}});
    const auto b = run({{"r.json", "[1]"}, {"log.txt", "b"}, {"model.bin", "w2"}});
    CHECK(compare_results(rule(CompareMode::json, 0.0), a, b).agree);
    // With `files`, what they match is compared: a JSON file by value, another by its SHA-256.
    CHECK(compare_results(rule(CompareMode::json, 0.0, {"*.json"}), a, b).agree);
    const auto c = compare_results(rule(CompareMode::json, 0.0, {"r.json", "model.bin"}), a, b);
    CHECK_FALSE(c.agree);
    CHECK(c.detail.rfind("model.bin: contents differ", 0) == 0);
    // No JSON file on either side: nothing to compare.
    const auto none = compare_results(rule(CompareMode::json, 0.0), run({{"log.txt", "a"}}), run({{"log.txt", "b"}}));
    CHECK(none.agree);
    CHECK(none.detail == "exit 0; no JSON files to compare");
}

TEST_CASE("compare json: invalid JSON on one side differs and on both sides the bytes decide", "[verify][evidence]") {
    const auto good = run({{"r.json", R"({"a": 1})"}});
    const auto bad = run({{"r.json", R"({"a": 1)"}});
    const auto bad_too = run({{"r.json", R"({"a": 1)"}});
    const auto bad_other = run({{"r.json", R"({"a": 1.0)"}});
    const auto c = compare_results(rule(CompareMode::json, 0.1), good, bad);
    CHECK_FALSE(c.agree);
    CHECK(c.detail == "r.json: not valid JSON in the second result");
    CHECK_FALSE(compare_results(rule(CompareMode::json, 0.1), bad, good).agree);
    CHECK(compare_results(rule(CompareMode::json, 0.1), bad, bad_too).agree);
    CHECK_FALSE(compare_results(rule(CompareMode::json, 0.1), bad, bad_other).agree);
    // Trailing bytes after the value are not JSON either.
    CHECK_FALSE(compare_results(rule(CompareMode::json, 0.1), good, run({{"r.json", R"({"a": 1} x)"}})).agree);
}

TEST_CASE("compare json: a deeply nested text neither crashes nor agrees by value", "[verify][evidence]") {
    const auto deep = run({{"r.json", nested_arrays(10'000)}});
    const auto flat = run({{"r.json", "[]"}});
    const auto c = compare_results(rule(CompareMode::json, 0.1), deep, flat);
    CHECK_FALSE(c.agree);
    CHECK(c.detail == "r.json: nested deeper than 64 in the first result");
    // The same bytes on both sides agree as exact would; other bytes (one more level) do not.
    CHECK(compare_results(rule(CompareMode::json, 0.1), deep, run({{"r.json", nested_arrays(10'000)}})).agree);
    CHECK_FALSE(compare_results(rule(CompareMode::json, 0.1), deep, run({{"r.json", nested_arrays(10'001)}})).agree);
    // The bound itself: 64 levels are compared by value, 65 are too deep.
    const auto at_bound = compare_results(rule(CompareMode::json, 0.1), run({{"r.json", nested_arrays(64)}}),
                                          run({{"r.json", " " + nested_arrays(64)}}));
    CHECK(at_bound.agree);
    CHECK(at_bound.detail == "exit 0; 1 JSON files within 0.1");
    CHECK_FALSE(compare_results(rule(CompareMode::json, 0.1), run({{"r.json", nested_arrays(65)}}),
                                run({{"r.json", " " + nested_arrays(65)}}))
                    .agree);
}

TEST_CASE("json_close: values nested deeper than the bound differ", "[verify]") {
    json deep = json::array();
    for (int i = 0; i < 10'000; ++i) {
        json outer = json::array();
        outer.push_back(std::move(deep));
        deep = std::move(outer);
    }
    std::string where;
    CHECK_FALSE(json_close(deep, deep, 0.0, &where));
    CHECK(where.find("nested deeper than 64") != std::string::npos);
    CHECK(where.size() <= 203);
    CHECK(json_close(json::parse(nested_arrays(64)), json::parse(nested_arrays(64)), 0.0));
    CHECK_FALSE(json_close(json::parse(nested_arrays(65)), json::parse(nested_arrays(65)), 0.0));
}

TEST_CASE("compare: malformed evidence differs without throwing", "[verify][evidence]") {
    // Every rule reads the outputs (the whole listing), json alone reads json_files.
    enum class ReadBy { every_rule, json_only };
    struct Case {
        const char* what;
        ReadBy read_by;
        std::function<void(RunResult&)> change;
    };
    const std::vector<Case> cases{
        {"outputs a string", ReadBy::every_rule, [](RunResult& r) { r.outputs = "x"; }},
        {"outputs discarded", ReadBy::every_rule, [](RunResult& r) { r.outputs = json(json::value_t::discarded); }},
        {"tree_sha256 null", ReadBy::every_rule, [](RunResult& r) { r.outputs["tree_sha256"] = nullptr; }},
        {"truncated a string", ReadBy::every_rule, [](RunResult& r) { r.outputs["truncated"] = "no"; }},
        {"entries a number", ReadBy::every_rule, [](RunResult& r) { r.outputs["entries"] = 5; }},
        {"entries missing", ReadBy::every_rule, [](RunResult& r) { r.outputs.erase("entries"); }},
        {"entry a string", ReadBy::every_rule, [](RunResult& r) { r.outputs["entries"][0] = "r.json"; }},
        {"path a number", ReadBy::every_rule, [](RunResult& r) { r.outputs["entries"][0]["path"] = 1; }},
        {"sha256 a number", ReadBy::every_rule, [](RunResult& r) { r.outputs["entries"][0]["sha256"] = 7; }},
        {"sha256 missing", ReadBy::every_rule, [](RunResult& r) { r.outputs["entries"][0].erase("sha256"); }},
        {"a path twice", ReadBy::every_rule,
         [](RunResult& r) { r.outputs["entries"].push_back(r.outputs["entries"][0]); }},
        {"json_files a number", ReadBy::json_only, [](RunResult& r) { r.json_files = 3; }},
        {"files an array", ReadBy::json_only, [](RunResult& r) { r.json_files["files"] = json::array(); }},
        {"a text a number", ReadBy::json_only, [](RunResult& r) { r.json_files["files"]["r.json"] = 1; }},
        {"skipped an object", ReadBy::json_only, [](RunResult& r) { r.json_files["skipped"] = json::object(); }},
    };
    const auto good = run({{"r.json", "[1]"}});
    for (const auto& c : cases) {
        INFO(c.what);
        RunResult bad = good;
        c.change(bad);
        const std::vector<recipe::Verify> rules{rule(CompareMode::json, 0.1), rule(CompareMode::exact, 0.0, {"*.json"}),
                                                rule(CompareMode::exact)};
        for (const auto& r : rules) {
            const bool reads = c.read_by == ReadBy::every_rule || r.compare == CompareMode::json;
            INFO(static_cast<int>(r.compare) << " files " << r.files.size());
            for (const bool bad_first : {true, false}) {
                verify::Comparison got;
                REQUIRE_NOTHROW(got = bad_first ? compare_results(r, bad, good) : compare_results(r, good, bad));
                if (reads) {
                    CHECK_FALSE(got.agree);
                    CHECK(got.detail.rfind(std::string("malformed evidence: the ") + (bad_first ? "first" : "second"),
                                           0) == 0);
                } else {
                    CHECK(got.agree); // a part the rule does not read
                }
            }
        }
    }
}

TEST_CASE("compare: details are short and printable whatever the files hold", "[verify][evidence]") {
    const std::string long_key(1000, 'k');
    const std::string hostile = "evil\n\x1b[31m\xff" + std::string(500, 'p') + ".json";
    const auto a = run({{hostile, R"({")" + long_key + R"(\u0007": [1, "x\n\u001b]0;pwned"]})"}});
    const auto b = run({{hostile, R"({")" + long_key + R"(\u0007": [1, "y"]})"}});
    for (const auto& c : {compare_results(rule(CompareMode::json, 0.1), a, b),
                          compare_results(rule(CompareMode::exact, 0.0, {"evil*"}), a, b),
                          compare_results(rule(CompareMode::json, 0.1), a, run({}))}) {
        INFO(c.detail);
        CHECK_FALSE(c.agree);
        CHECK(c.detail.size() <= 203);
        CHECK(c.detail.rfind("evil\\n\\x1b[31m\\xff", 0) == 0);
        for (const char ch : c.detail) {
            CHECK(static_cast<unsigned char>(ch) >= 0x20);
            CHECK(ch != 0x7f);
        }
    }
}

TEST_CASE("compare: verify none always agrees", "[verify][evidence]") {
    RunResult broken;
    broken.outputs = "x";
    const auto c = compare_results(rule(CompareMode::none), run({{"r.json", "[1]"}}, 0), broken);
    CHECK(c.agree);
    CHECK(c.detail == "not compared (verify: none)");
}

} // namespace test_compare
} // namespace

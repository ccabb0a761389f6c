// The dashboard's routes on a real service (loopback HTTP, SQLite file): the page and its files
// with their types and the headers that keep the page to its own origin, what the files may and
// may not contain, and GET /v1/pool/samples (who may read it, what members get, bad input).
#include "core/coordinator/dashboard.hpp"
#include "tests/core/coordinator/service_fixture.hpp"

#include <catch2/catch.hpp>

#include <regex>
#include <set>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_dashboard_routes {

using namespace gpupool;
using namespace gpupool::test::svc;
using json = nlohmann::json;

namespace {

std::string file_text(std::string_view name) {
    for (const auto& f : coordinator::dashboard_files()) {
        if (f.name == name) {
            return std::string(f.bytes);
        }
    }
    FAIL("no embedded dashboard file " << name);
    return {};
}

} // namespace

TEST_CASE("dashboard: the page and its files, with their types, no-cache and the security headers", "[dashboard]") {
    Server s;
    auto anyone = s.client(); // no token: the files hold no data
    const std::vector<std::pair<std::string, std::string>> files{
        {"/", "text/html; charset=utf-8"},
        {"/dashboard/app.js", "text/javascript; charset=utf-8"},
        {"/dashboard/style.css", "text/css; charset=utf-8"}};
    for (const auto& [path, type] : files) {
        INFO(path);
        auto r = anyone.request("GET", path);
        REQUIRE(r);
        CHECK(r->status == 200);
        CHECK(r->content_type == type);
        CHECK(r->headers.get("Cache-Control") == "no-cache");
        CHECK(r->headers.get("X-Content-Type-Options") == "nosniff");
        CHECK(r->headers.get("Referrer-Policy") == "no-referrer");
        const std::string csp = r->headers.get("Content-Security-Policy");
        CHECK_THAT(csp, Catch::StartsWith("default-src 'self'; img-src 'self' data:; style-src 'self'; "
                                          "script-src 'self'; connect-src 'self'; frame-ancestors 'none'"));
        CHECK_THAT(csp, !Catch::Contains("unsafe"));
        CHECK_FALSE(r->body.empty());
    }
    // The page is what was embedded, byte for byte.
    CHECK(anyone.request("GET", "/")->body == file_text("index.html"));
    // Nothing else is served from there, and the files take no other method.
    CHECK(anyone.request("GET", "/dashboard/secret.js")->status == 404);
    CHECK(anyone.request("GET", "/dashboard/")->status == 404);
    CHECK(anyone.request("POST", "/", "x")->status == 405);
}

TEST_CASE("dashboard: the files load nothing from elsewhere and draw data as text, never as HTML", "[dashboard]") {
    REQUIRE(coordinator::dashboard_files().size() == 3);
    for (const auto& f : coordinator::dashboard_files()) {
        INFO(f.name);
        std::string text(f.bytes);
        // The SVG namespace is a name, not something fetched; any other URL would be another origin.
        for (std::size_t at = 0; (at = text.find("http", at)) != std::string::npos; ++at) {
            const std::string from = text.substr(at, 30);
            if (from.starts_with("http://") || from.starts_with("https://")) {
                CHECK(from.starts_with("http://www.w3.org/2000/svg\""));
            }
        }
        CHECK_THAT(text, !Catch::Contains("src=\"//") && !Catch::Contains("href=\"//") && !Catch::Contains("url(") &&
                             !Catch::Contains("@import"));
    }
    const std::string html = file_text("index.html");
    const std::string js = file_text("app.js");
    // CSP: no inline script or style in the page; one script, from this origin.
    CHECK_THAT(html, !Catch::Contains(" style=") && !Catch::Contains("<style"));
    CHECK_FALSE(std::regex_search(html, std::regex(R"(\son[a-z]+\s*=)"))); // onclick=, onload=, ...
    CHECK(std::regex_search(html, std::regex(R"(<script src="/dashboard/app\.js" defer></script>)")));
    CHECK_FALSE(std::regex_search(html, std::regex(R"(<script(?![^>]*\ssrc=)[^>]*>)")));
    // Data goes on the page as text; the token stays in the tab.
    for (const char* banned : {"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                               "new Function", "localStorage", "setAttribute(\"style\"", "?token="}) {
        INFO(banned);
        CHECK_THAT(js, !Catch::Contains(banned));
    }
    CHECK_THAT(js, Catch::Contains("sessionStorage.setItem"));
    // Every element the script looks up by id is in the page.
    std::set<std::string> wanted;
    const std::regex lookup(R"re(\$\("([a-z-]+)"\))re");
    for (auto it = std::sregex_iterator(js.begin(), js.end(), lookup); it != std::sregex_iterator(); ++it) {
        wanted.insert((*it)[1].str());
    }
    CHECK(wanted.size() >= 15);
    for (const auto& id : wanted) {
        INFO("#" << id);
        CHECK_THAT(html, Catch::Contains("id=\"" + id + "\""));
    }
}

TEST_CASE("dashboard: GET /v1/pool/samples for admins and members, job counts for admins only",
          "[dashboard][samples]") {
    Pool p(30'000, std::int64_t{64} << 20, 100); // a sample every 100 ms
    p.submit({spec("sampled")});
    auto admin = p.server.client(p.server.admin_token);
    // Samples taken since the job was submitted (the first ones, at the start, saw an empty pool).
    json all;
    REQUIRE(test::eventually([&] {
        all = call(admin, "GET", "/v1/pool/samples");
        return !all["samples"].empty() && all["samples"].back()["jobs_running"] == 1; // placed on the worker
    }));
    CHECK(all["every_ms"] == 100);
    const json& latest = all["samples"].back();
    CHECK(latest["at"].is_number_integer());
    CHECK(latest["workers_online"] == 1);
    CHECK(latest["gpus_online"] == 1);
    CHECK(latest["gpu_milli_online"] == 1000);
    CHECK(latest["gpu_milli_allocated"] == 250); // the job's quarter of the GPU
    CHECK(latest["jobs_queued"] == 0);

    // A member of another team: the capacity, not the pool-wide job counts.
    auto other = p.server.client(p.other);
    const json theirs = call(other, "GET", "/v1/pool/samples?since=0");
    REQUIRE_FALSE(theirs["samples"].empty());
    CHECK(theirs["samples"].back()["gpu_milli_online"] == 1000);
    for (const json& x : theirs["samples"]) {
        CHECK(x["jobs_queued"].is_null());
        CHECK(x["jobs_running"].is_null());
    }

    // Since a time after them all: none.
    const json since = call(admin, "GET", "/v1/pool/samples?since=" + std::to_string(latest["at"].get<std::int64_t>()));
    REQUIRE_FALSE(since["samples"].empty());
    CHECK(since["samples"][0]["at"] == latest["at"]);
    CHECK(call(admin, "GET", "/v1/pool/samples?since=" + std::to_string(std::int64_t{1} << 50))["samples"].empty());
    // Bad input is refused, naming the parameter.
    for (const char* bad : {"-1", "abc", "1e3", "99999999999999999999"}) {
        INFO(bad);
        auto r = admin.request("GET", std::string("/v1/pool/samples?since=") + bad);
        REQUIRE(r);
        CHECK(r->status == 400);
        CHECK(json::parse(r->body)["field"] == "since");
    }
    // A worker token, and no token: nothing.
    auto w = p.server.client(p.worker);
    CHECK(w.request("GET", "/v1/pool/samples")->status == 403);
    CHECK(p.server.client().request("GET", "/v1/pool/samples")->status == 401);
}

} // namespace test_dashboard_routes
} // namespace

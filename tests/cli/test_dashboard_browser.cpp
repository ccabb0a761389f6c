// The coordinator's dashboard end to end, as an operator meets it: a real `gpupool coordinator`
// process, a real worker running real jobs, and real headless Chromium driven over the DevTools
// protocol (tests/cli/cdp.hpp). The page must load with no console error, refuse a wrong token and
// show nothing then, show the running job and its worker, notice the job's end without a reload,
// fit a phone's width, and show a member only its own team's work. Screenshots are kept as
// artifacts: ${GPUPOOL_ARTIFACTS_DIR:-<build dir>/artifacts}/dashboard-*.png.
//
// Without `chromium` installed it is skipped with a warning, unless GPUPOOL_REQUIRE_BROWSER=1.
#include "core/recipe/recipe_json.hpp"
#include "tests/cli/cdp.hpp"
#include "tests/cli/processes.hpp"
#include "tests/path_first.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_dashboard_browser {

using namespace gpupool;
using json = nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

using test::PathFirst;

namespace {

json checked(net::HttpClient& c, const std::string& method, const std::string& path, const json& body, int expect) {
    auto r = c.request(method, path, body.is_null() ? std::string() : body.dump());
    REQUIRE(r);
    INFO(method << " " << path << " -> " << r->status << " " << r->body);
    REQUIRE(r->status == expect);
    return json::parse(r->body);
}

// A job on `gpu_milli` of a GPU that prints, then waits until `release` exists, then prints its last line.
std::int64_t submit_waiting(const std::string& url, const std::string& member, const std::string& name,
                            const fs::path& release, std::int64_t gpu_milli = 500) {
    recipe::JobSpec s;
    s.name = name;
    s.image = "localhost/gpupool/busybox:latest";
    s.command = {"echo started " + name + "; while [ ! -e " + release.string() +
                 " ]; do sleep 0.2; done; echo finished " + name};
    s.shell = true;
    s.resources.gpus = 1;
    s.resources.gpu_milli = gpu_milli;
    s.resources.cpu_milli = 100;
    s.resources.memory_mib = 64;
    s.resources.max_runtime_s = 300;
    auto c = test::http_client(url, member);
    const json r =
        checked(c, "POST", "/v1/jobs",
                {{"source", "dash.toml"}, {"jobs", json::parse(recipe::to_json(std::vector{s}).dump())}}, 201);
    return r["jobs"][0].get<std::int64_t>();
}

fs::path artifacts_dir() {
    const char* env = std::getenv("GPUPOOL_ARTIFACTS_DIR");
    fs::path dir =
        env != nullptr && *env != '\0' ? fs::path(env) : fs::path(GPUPOOL_BINARY).parent_path() / "artifacts";
    fs::create_directories(dir);
    return dir;
}

// Writes the page as it looks now to `name` in the artifacts folder; returns the PNG's bytes.
std::string screenshot(test::CdpSession& page, const std::string& name) {
    const json shot = page.call("Page.captureScreenshot", {{"format", "png"}});
    const std::string png = test::base64_decode(shot["data"].get<std::string>());
    const fs::path to = artifacts_dir() / name;
    std::ofstream(to, std::ios::binary).write(png.data(), static_cast<std::streamsize>(png.size()));
    WARN("dashboard screenshot: " << to.string() << " (" << png.size() << " bytes)");
    return png;
}

bool is_png(const std::string& bytes) {
    return bytes.size() > 1000 && bytes.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) == 0;
}

// A JavaScript string literal of `s` (JSON's quoting is JavaScript's).
std::string js(const std::string& s) {
    return json(s).dump();
}

void sign_in(test::CdpSession& page, const std::string& token) {
    page.evaluate("document.getElementById('token').focus()");
    page.call("Input.insertText", {{"text", token}});
    page.evaluate("document.getElementById('sign-in').click()");
}

// The visible text of the page (what a reader sees, hidden parts left out).
std::string page_text(test::CdpSession& page) {
    return page.evaluate("document.body.innerText").get<std::string>();
}

bool shown(test::CdpSession& page, const std::string& selector) {
    return page
        .evaluate("(() => { const e = document.querySelector(" + js(selector) +
                  "); return !!e && e.offsetParent !== null; })()")
        .get<bool>();
}

std::string text_of(test::CdpSession& page, const std::string& selector) {
    const json v = page.evaluate("(() => { const e = document.querySelector(" + js(selector) +
                                 "); return e ? e.textContent : null; })()");
    return v.is_string() ? v.get<std::string>() : std::string();
}

// Console errors, uncaught exceptions and error-level log entries (CSP violations among them).
// The one expected kind: the browser's own line about the 401 the wrong token got from /v1/whoami.
std::vector<std::string> page_errors(const test::CdpSession& page) {
    std::vector<std::string> out;
    for (const json& e : page.events()) {
        const std::string method = e.value("method", "");
        const json& p = e.contains("params") ? e["params"] : json::object();
        if (method == "Runtime.exceptionThrown") {
            out.push_back("exception: " + p.dump());
        } else if (method == "Runtime.consoleAPICalled" && p.value("type", "") == "error") {
            out.push_back("console.error: " + p.dump());
        } else if (method == "Log.entryAdded" && p["entry"].value("level", "") == "error") {
            const json& entry = p["entry"];
            const bool wrong_token = entry.value("source", "") == "network" &&
                                     entry.value("url", "").ends_with("/v1/whoami") &&
                                     entry.value("text", "").find("401") != std::string::npos;
            if (!wrong_token) {
                out.push_back("log: " + entry.dump());
            }
        }
    }
    return out;
}

// Chromium, or a skip (with a warning) when it is not installed and not required.
std::optional<fs::path> chromium_or_skip() {
    const auto chromium = test::find_chromium();
    const char* require = std::getenv("GPUPOOL_REQUIRE_BROWSER");
    if (!chromium) {
        if (require != nullptr && std::string(require) == "1") {
            FAIL("chromium is not installed and GPUPOOL_REQUIRE_BROWSER=1 (apt-get install chromium)");
        }
        WARN("SKIPPED: the dashboard's browser test needs `chromium` (Debian package chromium); not installed here");
    }
    return chromium;
}

} // namespace

// The control for the check that ends the test below: a page with a console error, an uncaught
// exception and a style attribute its Content-Security-Policy forbids makes page_errors() report
// all three (were it blind to them, "no console errors" would pass on any page).
TEST_CASE("dashboard browser test: the page error check sees console errors, exceptions and CSP violations",
          "[dashboard][browser]") {
    const auto chromium = chromium_or_skip();
    if (!chromium) {
        return;
    }
    test::Chromium browser(*chromium);
    test::CdpSession page(browser.page_websocket_url());
    page.call("Runtime.enable");
    page.call("Log.enable");
    page.call("Page.enable");
    const std::string html = "<meta http-equiv=\"Content-Security-Policy\" content=\"style-src 'self'\">"
                             "<p style=\"color: red\">styled</p>"
                             "<script>console.error('console-boom'); throw new Error('thrown-boom');</script>";
    page.call("Page.navigate", {{"url", "data:text/html," + html}});
    std::vector<std::string> errors;
    const auto seen = [&](const std::string& what) {
        return std::any_of(errors.begin(), errors.end(),
                           [&](const std::string& e) { return e.find(what) != std::string::npos; });
    };
    CHECK(page.wait_until(
        [&] {
            errors = page_errors(page);
            return seen("console-boom") && seen("thrown-boom") && seen("Content Security Policy") &&
                   seen("console.error: ") && seen("exception: ") && seen("log: ");
        },
        10s));
    for (const auto& e : errors) {
        UNSCOPED_INFO(e);
    }
    CHECK(seen("console.error: "));
    CHECK(seen("exception: "));
    CHECK(seen("log: "));
}

TEST_CASE("dashboard in headless Chromium: wrong token refused, running job and worker shown, live end, phone width, "
          "member sees own team",
          "[dashboard][browser][coordinator-cli][slow]") {
    const auto chromium = chromium_or_skip();
    if (!chromium) {
        return;
    }

    test::TempDir dir;
    // The worker's one GPU: a stand-in nvidia-smi that reports an L4 (and no other process on it).
    test::TempDir bin;
    const auto smi = bin.write("nvidia-smi", "#!/bin/sh\n"
                                             "case \"$*\" in\n"
                                             "  *query-gpu=index*) echo '0, GPU-dash, NVIDIA L4, 23034' ;;\n"
                                             "  *query-gpu=uuid*) echo 'GPU-dash, 0' ;;\n"
                                             "  *query-compute-apps*) ;;\n"
                                             "  *) exit 6 ;;\n"
                                             "esac\n");
    fs::permissions(smi, fs::perms::owner_all);
    PathFirst path(bin.path());
    fs::create_directories(dir.path() / "coord");
    test::CoordinatorProcess coord(dir.path() / "coord", {"--sample-ms", "500"}); // a chart with points soon
    const std::string url = coord.url();
    auto admin = test::http_client(url, coord.admin());
    for (const char* team : {"fellows", "others", "owners"}) {
        checked(admin, "POST", "/v1/admin/teams", {{"name", team}}, 201);
    }
    for (const char* team : {"fellows", "others"}) {
        checked(admin, "POST", "/v1/admin/grants", {{"team", team}, {"amount_micro", 1'000'000'000}}, 201);
    }
    const std::string member = checked(admin, "POST", "/v1/admin/tokens",
                                       {{"role", "member"}, {"team", "fellows"}, {"label", "alice"}}, 201)["token"];
    const std::string other = checked(admin, "POST", "/v1/admin/tokens",
                                      {{"role", "member"}, {"team", "others"}, {"label", "bob"}}, 201)["token"];
    const std::string enroll =
        checked(admin, "POST", "/v1/admin/tokens", {{"role", "enroll"}, {"team", "owners"}, {"uses", 5}}, 201)["token"];
    test::WorkerProcess worker(dir.path() / "w", url, enroll, {"--name", "lab-box-7"});

    const fs::path release_ours = dir.path() / "release-fellows";
    const fs::path release_theirs = dir.path() / "release-others";
    const std::int64_t ours = submit_waiting(url, member, "dash-train", release_ours);
    const std::int64_t theirs = submit_waiting(url, other, "others-secret", release_theirs);
    const std::string our_id = std::to_string(ours);
    // A whole-GPU job waits while the two halves run (and after ours ends: theirs still holds half).
    const std::int64_t whole = submit_waiting(url, member, "dash-whole", release_ours, 1000);
    std::string worker_name;
    REQUIRE(test::eventually(
        [&] {
            auto r = admin.request("GET", "/v1/pool");
            if (!r || r->status != 200) {
                return false;
            }
            const json pool = json::parse(r->body);
            if (pool["running"].size() != 2 || pool["workers"].empty()) {
                return false;
            }
            worker_name = pool["workers"][0]["name"].get<std::string>(); // lab-box-7, as the pool knows it
            return true;
        },
        30s));
    INFO("worker stderr: " << worker.stderr_text());
    REQUIRE_FALSE(worker_name.empty());

    test::Chromium browser(*chromium);
    test::CdpSession page(browser.page_websocket_url());
    page.call("Runtime.enable");
    page.call("Log.enable");
    page.call("Page.enable");
    page.call("Emulation.setDeviceMetricsOverride",
              {{"width", 1280}, {"height", 1000}, {"deviceScaleFactor", 1}, {"mobile", false}});
    page.call("Page.navigate", {{"url", url + "/"}});
    REQUIRE(page.wait_until(
        [&] {
            return page.evaluate("document.readyState === 'complete' && !!document.getElementById('login-form')")
                .get<bool>();
        },
        15s));
    page.evaluate("window.__same_page = 'yes'"); // gone if anything reloads the page
    CHECK(shown(page, "#login-form"));
    CHECK_FALSE(shown(page, "#pool"));

    // A wrong token: a clear error, nothing of the pool, nothing kept.
    sign_in(page, "gpp_0000000000000000000000000000000000000000000000000000000000000000");
    REQUIRE(page.wait_until([&] { return shown(page, "#login-error"); }, 10s));
    CHECK_THAT(text_of(page, "#login-error"), Catch::Contains("Wrong token"));
    CHECK_FALSE(shown(page, "#pool"));
    CHECK(page.evaluate("document.querySelectorAll('[data-job-id], [data-worker-id]').length").get<int>() == 0);
    CHECK_THAT(page_text(page), !Catch::Contains("dash-train") && !Catch::Contains(worker_name));
    CHECK(page.evaluate("sessionStorage.length + localStorage.length").get<int>() == 0);

    // The admin token: the running job on its worker, the other team's job too.
    sign_in(page, coord.admin());
    const std::string running_row = "#running [data-job-id=\"" + our_id + "\"]";
    REQUIRE(page.wait_until([&] { return shown(page, running_row); }, 15s));
    CHECK_THAT(text_of(page, running_row), Catch::Contains("dash-train") && Catch::Contains(worker_name) &&
                                               Catch::Contains("fellows") && Catch::Contains("alice"));
    CHECK(shown(page, "#running [data-job-id=\"" + std::to_string(theirs) + "\"]"));
    CHECK_THAT(text_of(page, running_row), Catch::Contains("0.50 GPU") && Catch::Contains("GPU 0"));
    // The worker's GPU, shared by the two half-GPU jobs.
    CHECK(shown(page, "#workers [data-worker-id]"));
    CHECK_THAT(text_of(page, "#workers"), Catch::Contains(worker_name) && Catch::Contains("online"));
    CHECK_THAT(text_of(page, "#workers [data-gpu-index=\"0\"]"),
               Catch::Contains("L4") && Catch::Contains("1.00, 2 jobs"));
    CHECK_THAT(text_of(page, "#totals"), Catch::Contains("GPUs shared1") && Catch::Contains("1.00 of 1.00"));
    // The queue, with why the whole-GPU job waits.
    const std::string queued_row = "#queued [data-job-id=\"" + std::to_string(whole) + "\"]";
    CHECK(shown(page, queued_row));
    CHECK_THAT(text_of(page, queued_row), Catch::Contains("dash-whole"));
    CHECK(text_of(page, queued_row + " td.why").size() > 10);
    CHECK_THAT(text_of(page, "#credits"), Catch::Contains("fellows") && Catch::Contains("others"));
    CHECK_FALSE(shown(page, "#login-form"));
    CHECK_FALSE(shown(page, "#login-error"));
    // The chart of GPUs online and given out, from the coordinator's samples (one per 500 ms here; the
    // page reads them every 30 s, so the first read may hold only a few).
    CHECK(page.wait_until([&] { return shown(page, "#chart svg"); }, 10s));
    CHECK(page.evaluate("document.querySelectorAll('#chart polyline.online, #chart polygon.allocated').length")
              .get<int>() == 2);
    CHECK(page.evaluate("document.querySelector('#chart polyline.online').getAttribute('points').split(' ').length")
              .get<int>() >= 2);
    // The token is in this tab's session storage only: not in localStorage, the URL or a cookie.
    CHECK(page.evaluate("sessionStorage.getItem('gpupool.token')").get<std::string>() == coord.admin());
    CHECK(page.evaluate("localStorage.length").get<int>() == 0);
    CHECK_THAT(page.evaluate("location.href + document.cookie").get<std::string>(), !Catch::Contains("gpp_"));
    const std::string desktop = screenshot(page, "dashboard-desktop.png");
    CHECK(is_png(desktop));

    // The job ends: the page moves it to the recent jobs by itself, and shows its log on a click.
    std::ofstream(release_ours).put('\n');
    const std::string recent_row = "#recent [data-job-id=\"" + our_id + "\"]";
    REQUIRE(page.wait_until([&] { return shown(page, recent_row) && !shown(page, running_row); }, 30s));
    CHECK_THAT(text_of(page, recent_row), Catch::Contains("succeeded"));
    CHECK(page.wait_until(
        [&] { return text_of(page, "#workers [data-gpu-index=\"0\"]").find("0.50, 1 job") != std::string::npos; },
        10s));
    CHECK(page.evaluate("window.__same_page").get<std::string>() == "yes");
    page.evaluate("document.querySelector(" + js(recent_row + " button") + ").click()");
    CHECK(page.wait_until([&] { return text_of(page, "#log").find("finished dash-train") != std::string::npos; }, 10s));
    CHECK_THAT(text_of(page, "#log"), Catch::Contains("started dash-train"));

    // A phone: nothing wider than the screen, text still readable.
    page.call("Emulation.setDeviceMetricsOverride",
              {{"width", 390}, {"height", 844}, {"deviceScaleFactor", 2}, {"mobile", true}});
    page.pump(1s);
    const int scroll_width = page.evaluate("document.documentElement.scrollWidth").get<int>();
    INFO("scrollWidth at 390 px: " << scroll_width);
    CHECK(scroll_width <= 390);
    CHECK(page.evaluate("parseFloat(getComputedStyle(document.body).fontSize)").get<double>() >= 14.0);
    const std::string phone = screenshot(page, "dashboard-phone.png");
    CHECK(is_png(phone));

    // Sign out: the token and everything drawn are gone.
    page.evaluate("document.getElementById('sign-out').click()");
    REQUIRE(page.wait_until([&] { return shown(page, "#login-form"); }, 5s));
    CHECK(page.evaluate("sessionStorage.getItem('gpupool.token')").is_null());
    CHECK(page.evaluate("document.querySelectorAll('[data-job-id], [data-worker-id]').length").get<int>() == 0);

    // A member of fellows: its team's jobs and credits and the pool's workers, not the other team's job.
    sign_in(page, member);
    REQUIRE(page.wait_until([&] { return shown(page, recent_row); }, 15s));
    CHECK(shown(page, "#workers [data-worker-id]"));
    const std::string seen = page_text(page);
    CHECK_THAT(seen, Catch::Contains("member of fellows") && !Catch::Contains("others-secret"));
    CHECK(page.evaluate("document.querySelectorAll('[data-job-id=\"" + std::to_string(theirs) + "\"]').length")
              .get<int>() == 0);
    CHECK_THAT(text_of(page, "#credits"), Catch::Contains("fellows") && !Catch::Contains("others"));

    page.pump(500ms);
    const auto errors = page_errors(page);
    for (const auto& e : errors) {
        UNSCOPED_INFO(e);
    }
    CHECK(errors.empty());
    std::ofstream(release_theirs).put('\n');
}

} // namespace test_dashboard_browser
} // namespace

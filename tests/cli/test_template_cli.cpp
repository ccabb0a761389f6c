// `gpupool template build` with real podman: a Dockerfile template whose FROM is our base gets the
// base built first; a build.sh template runs with ENGINE set. Skipped (WARN) without podman and the
// test image, failed instead under GPUPOOL_REQUIRE_CONTAINERS=1, as the runtime tests do.
#include "tests/support.hpp"
#include "tests/worker/runtime/runtimes_under_test.hpp"

#include <boost/process.hpp>
#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_template_cli {

namespace bp = boost::process;
using gpupool::test::run_gpupool;

namespace {

bool image_exists(const std::string& image) {
    return bp::system(bp::search_path("podman"), "image", "exists", image, bp::std_out > bp::null,
                      bp::std_err > bp::null) == 0;
}

void remove_image(const std::string& image) {
    bp::system(bp::search_path("podman"), "rmi", "-f", image, bp::std_out > bp::null, bp::std_err > bp::null);
}

} // namespace

TEST_CASE("cli: template build builds a missing base first, then the template, with podman") {
    const auto& all = gpupool::test::runtimes_under_test();
    auto podman = std::find_if(all.begin(), all.end(), [](const auto& r) { return r.kind == "podman"; });
    REQUIRE(podman != all.end());
    if (!gpupool::test::runtime_or_skip(*podman)) {
        return;
    }
    gpupool::test::TempDir tmp;
    const std::string base = "localhost/gpupool/base:tpl-test-1";
    const std::string child = "localhost/gpupool/tpl-child-test:1";
    remove_image(child);
    remove_image(base);
    tmp.write("templates/base/Dockerfile", "FROM localhost/gpupool/busybox:latest\nRUN echo base > /base-marker\n");
    tmp.write("templates/tpl-child/Dockerfile", "FROM " + base + "\nRUN cat /base-marker > /child-marker\n");
    auto r =
        run_gpupool({"template", "build", "tpl-child", "--tag", child, "--from", (tmp.path() / "templates").string()});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("building the base first"));
    CHECK(image_exists(base));
    CHECK(image_exists(child));
    remove_image(child);
    remove_image(base);

    auto missing = run_gpupool({"template", "build", "nothing-here", "--from", (tmp.path() / "templates").string()});
    CHECK(missing.exit_code == 1);
    CHECK_THAT(missing.err, Catch::Contains("no template `nothing-here`"));
    CHECK(run_gpupool({"template", "build", "x", "--tag", "--privileged"}).exit_code != 0);
}

} // namespace test_template_cli
} // namespace

// Security review 3, low: the registry allow-list matched the fully qualified name while the engine
// got the image as written, so podman's short-name search could pull from a registry the owner did
// not allow. The engine now gets the fully qualified reference the owner's terms were checked
// against (worker/runtime/oci_runtime.cpp).
#include "core/api/owner_terms.hpp"
#include "worker/runtime/oci_runtime.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_image_qualified {

using namespace gpupool;
using namespace gpupool::worker;

TEST_CASE("oci run argv: the engine gets the image fully qualified, as the owner's registries were checked",
          "[runtime][security]") {
    // A short name would let the engine search its own registries (podman's
    // unqualified-search-registries) past an owner who allows only docker.io/library/.
    const api::OwnerTerms only_library{0, {}, {"docker.io/library/"}};
    const std::string digest = "@sha256:" + std::string(64, 'e');
    const std::vector<std::pair<std::string, std::string>> cases{
        {"busybox", "docker.io/library/busybox:latest"},
        {"python:3.12", "docker.io/library/python:3.12"},
        {"me/eval:1", "docker.io/me/eval:1"},
        {"docker.io/busybox", "docker.io/library/busybox:latest"},
        {"index.docker.io/me/eval", "docker.io/me/eval:latest"},
        {"ghcr.io/me/eval" + digest, "ghcr.io/me/eval" + digest},
        {"localhost/gpupool/busybox:latest", "localhost/gpupool/busybox:latest"}, // the tests' local image
        {"host:5000/x", "host:5000/x:latest"},
    };
    for (OciTool tool : {OciTool::podman, OciTool::docker}) {
        for (const auto& [image, qualified] : cases) {
            DYNAMIC_SECTION(to_string(tool) << " " << image) {
                ContainerSpec s;
                s.name = "gpupool-a42";
                s.argv = {"python", "eval.py"};
                s.image = image;
                const auto argv = build_run_argv(tool, s);
                const auto dash = std::find(argv.begin(), argv.end(), "--");
                REQUIRE(dash + 1 < argv.end());
                CHECK(*(dash + 1) == qualified);
                CHECK(std::vector<std::string>(dash + 2, argv.end()) == s.argv);
                // The owner's check and the engine see one name: what the check allowed is what runs.
                CHECK(api::outside_terms(only_library, "t", image, 0).has_value() ==
                      !qualified.starts_with("docker.io/library/"));
            }
        }
    }
}

} // namespace test_image_qualified
} // namespace

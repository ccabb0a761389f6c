// What an engine's failed pull means (worker/runtime/image_pull.hpp): the job's error only when a
// registry clearly says so. The messages are the engines' own: podman 4.3's, captured against a
// loopback registry that answers MANIFEST_UNKNOWN and DENIED and with no network at all; docker's
// daemon's wording for the same answers.
#include "worker/runtime/image_pull.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_image_pull {

using gpupool::worker::classify_pull_failure;
using gpupool::worker::pull_error_line;
using gpupool::worker::PullVerdict;

namespace {

struct Case {
    const char* engine;
    std::string message;
    PullVerdict verdict;
};

} // namespace

TEST_CASE("image pull: the engines' messages, the job's or the engine's", "[runtime][image]") {
    const std::vector<Case> cases{
        // The registry does not know the image or the tag: the job's.
        {"podman",
         "Error: initializing source docker://127.0.0.1:5999/gpupool/no-such-image:1: reading manifest 1 in "
         "127.0.0.1:5999/gpupool/no-such-image: manifest unknown: manifest unknown",
         PullVerdict::image_unavailable},
        {"docker",
         "Error response from daemon: manifest for 127.0.0.1:5999/gpupool/no-such-image:1 not found: manifest "
         "unknown: manifest unknown",
         PullVerdict::image_unavailable},
        {"docker", "Error response from daemon: manifest for busybox:doesnotexist not found",
         PullVerdict::image_unavailable},
        {"podman",
         "Error: initializing source docker://quay.io/nope/nope:1: reading manifest 1 in quay.io/nope/nope: "
         "name unknown: repository not found",
         PullVerdict::image_unavailable},
        // Refused: the job's (its owner must grant access or fix the name).
        {"podman",
         "Error: initializing source docker://127.0.0.1:5999/denied/x:1: reading manifest 1 in "
         "127.0.0.1:5999/denied/x: denied",
         PullVerdict::image_unavailable},
        {"docker",
         "Error response from daemon: pull access denied for nope/nope, repository does not exist or may require "
         "'docker login': denied: requested access to the resource is denied",
         PullVerdict::image_unavailable},
        {"podman",
         "Error: initializing source docker://ghcr.io/private/x:1: reading manifest 1 in ghcr.io/private/x: "
         "unauthorized: authentication required",
         PullVerdict::image_unavailable},
        // A bad reference or no image for this platform: the job's.
        {"podman", "Error: repository name must be lowercase", PullVerdict::image_unavailable},
        {"docker", "invalid reference format: repository name (library/Bad) must be lowercase",
         PullVerdict::image_unavailable},
        {"docker", "Error response from daemon: no matching manifest for linux/amd64 in the manifest list entries",
         PullVerdict::image_unavailable},
        {"podman",
         "Error: choosing an image from manifest list docker://x/y:1: no image found in manifest list for "
         "architecture amd64, variant \"\", OS linux",
         PullVerdict::image_unavailable},
        // No network, a registry that is down or slow, a broken engine: never the job's.
        {"podman",
         "Error: initializing source docker://busybox:doesnotexist: pinging container registry "
         "registry-1.docker.io: Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup registry-1.docker.io on "
         "10.255.255.53:53: no such host",
         PullVerdict::engine},
        {"podman",
         "Error: initializing source docker://localhost/gpupool/no-such-image:1: pinging container registry "
         "localhost: Get \"https://localhost/v2/\": dial tcp 127.0.0.1:443: connect: connection refused",
         PullVerdict::engine},
        {"docker",
         "Error response from daemon: Get \"https://registry-1.docker.io/v2/\": net/http: request canceled while "
         "waiting for connection (Client.Timeout exceeded while awaiting headers)",
         PullVerdict::engine},
        {"docker",
         "Error response from daemon: toomanyrequests: You have reached your pull rate limit.",
         PullVerdict::engine},
        {"podman",
         "Error: copying system image from manifest list: writing blob: adding layer with blob \"sha256:ab\": "
         "Error processing tar file(exit status 1): open /var/lib/containers/storage/overlay/x: permission denied",
         PullVerdict::engine},
        {"docker", "Cannot connect to the Docker daemon at unix:///run/docker.sock. Is the docker daemon running?",
         PullVerdict::engine},
        {"podman", "Error: received unexpected HTTP status: 502 Bad Gateway", PullVerdict::engine},
    };
    for (const auto& c : cases) {
        INFO(c.engine << ": " << c.message);
        CHECK(classify_pull_failure(c.message) == c.verdict);
    }
}

TEST_CASE("image pull: the engine's message is its last line, without its Error prefix", "[runtime][image]") {
    const std::string podman =
        "Trying to pull 127.0.0.1:5999/x:1...\n"
        "time=\"2026-12-05T02:31:47Z\" level=warning msg=\"Failed, retrying in 1s ... (2/3).\"\n"
        "Error: initializing source docker://127.0.0.1:5999/x:1: reading manifest 1 in 127.0.0.1:5999/x: manifest "
        "unknown: manifest unknown\n\n";
    CHECK(pull_error_line(podman) ==
          "initializing source docker://127.0.0.1:5999/x:1: reading manifest 1 in 127.0.0.1:5999/x: manifest unknown: "
          "manifest unknown");
    CHECK(pull_error_line("Error response from daemon: manifest for x:1 not found\n") == "manifest for x:1 not found");
    CHECK(pull_error_line("").empty());
    CHECK(pull_error_line(std::string(5000, 'x')).size() == 1000);
}

} // namespace test_image_pull
} // namespace

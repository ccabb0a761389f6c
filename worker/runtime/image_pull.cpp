#include "worker/runtime/image_pull.hpp"

#include "core/util/strings.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <sstream>

namespace gpupool::worker {

namespace {

using util::lower;

bool has(const std::string& text, std::string_view phrase) { return text.find(phrase) != std::string::npos; }

// A registry's "denied" (podman: "reading manifest 1 in host/x: denied"; docker: "denied: requested
// access to the resource is denied"), never a file's "permission denied".
bool registry_denied(const std::string& text) {
    for (std::size_t at = text.find("denied"); at != std::string::npos; at = text.find("denied", at + 1)) {
        const bool after_colon = at >= 2 && text.compare(at - 2, 2, ": ") == 0;
        const bool at_start = at == 0;
        const bool ends = at + 6 == text.size() || text[at + 6] == ':';
        if ((after_colon || at_start) && ends) {
            return true;
        }
    }
    return false;
}

constexpr std::array<std::string_view, 12> k_job_phrases{
    "manifest unknown",
    "name unknown",
    "repository does not exist",
    "pull access denied",
    "requested access to the resource is denied",
    "unauthorized",
    "authentication required",
    "no matching manifest",
    "no image found in manifest list",
    "invalid reference format",
    "must be lowercase",
    "manifest invalid",
};

} // namespace

PullVerdict classify_pull_failure(std::string_view engine_message) {
    const std::string text = lower(engine_message);
    for (std::string_view phrase : k_job_phrases) {
        if (has(text, phrase)) {
            return PullVerdict::image_unavailable;
        }
    }
    // docker: "manifest for host/x:1 not found: manifest unknown" (also caught above when complete).
    const auto manifest_for = text.find("manifest for ");
    if (manifest_for != std::string::npos && text.find(" not found", manifest_for) != std::string::npos) {
        return PullVerdict::image_unavailable;
    }
    return registry_denied(text) ? PullVerdict::image_unavailable : PullVerdict::engine;
}

std::string pull_error_line(std::string_view engine_stderr) {
    std::istringstream in{std::string(engine_stderr)};
    std::string last;
    for (std::string line; std::getline(in, line);) {
        while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())) != 0) {
            line.pop_back();
        }
        if (!line.empty()) {
            last = line;
        }
    }
    for (std::string_view prefix : {std::string_view("Error: "), std::string_view("Error response from daemon: ")}) {
        if (last.rfind(prefix, 0) == 0) {
            last.erase(0, prefix.size());
        }
    }
    constexpr std::size_t k_max = 1000;
    if (last.size() > k_max) {
        last.resize(k_max);
    }
    return last;
}

} // namespace gpupool::worker

#include "worker/runtime/oci_json.hpp"

#include "core/api/run_report.hpp"
#include "core/recipe/image_ref.hpp"

#include <nlohmann/json.hpp>

namespace gpupool::worker {

namespace {

// A string member of `obj`, or "" when absent or not a string.
std::string string_member(const nlohmann::json& obj, const char* key) {
    const auto it = obj.find(key);
    return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// "host/path:tag@sha256:..." -> "host/path", qualified (recipe::qualified_image without its tag);
// "" for a name that is not a valid reference.
std::string repository_of(std::string_view reference) {
    reference = reference.substr(0, reference.find('@'));
    const auto colon = reference.rfind(':');
    const auto slash = reference.rfind('/');
    if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
        reference = reference.substr(0, colon);
    }
    if (reference.empty() || !recipe::validate_image_reference(reference)) {
        return {};
    }
    std::string q = recipe::qualified_image(reference);
    return q.substr(0, q.rfind(':')); // the ":latest" it added
}

// docker's .RepoDigests: the digest of the entry for `reference`'s repository, else of the first.
std::string repo_digest(const nlohmann::json& image, std::string_view reference) {
    const auto it = image.find("RepoDigests");
    if (it == image.end() || !it->is_array()) {
        return {};
    }
    const std::string want = repository_of(reference);
    std::string first;
    for (const auto& e : *it) {
        const std::string entry = e.is_string() ? e.get<std::string>() : std::string();
        const auto at = entry.find('@');
        if (at == std::string::npos) {
            continue;
        }
        const std::string digest = entry.substr(at + 1);
        if (!want.empty() && repository_of(entry.substr(0, at)) == want) {
            return digest;
        }
        if (first.empty()) {
            first = digest;
        }
    }
    return first;
}

} // namespace

Result<std::vector<FoundContainer>> parse_inspect_json(std::string_view json) {
    try {
        auto doc = nlohmann::json::parse(json);
        if (!doc.is_array()) {
            return make_error(ErrorCode::io, "container inspect did not answer a JSON array");
        }
        std::vector<FoundContainer> out;
        for (const auto& c : doc) {
            FoundContainer f;
            f.name = c.at("Name").get<std::string>();
            if (!f.name.empty() && f.name.front() == '/') {
                f.name.erase(0, 1); // docker's names start with a slash
            }
            const auto& config = c.at("Config");
            if (config.contains("Labels") && config.at("Labels").is_object()) {
                for (const auto& [key, value] : config.at("Labels").items()) {
                    f.labels[key] = value.get<std::string>();
                }
            }
            f.running = c.at("State").at("Running").get<bool>();
            out.push_back(std::move(f));
        }
        return out;
    } catch (const nlohmann::json::exception& e) {
        return make_error(ErrorCode::io, std::string("cannot read container inspect JSON: ") + e.what());
    }
}

Result<ContainerState> parse_state_json(std::string_view json) {
    try {
        auto doc = nlohmann::json::parse(json);
        ContainerState st;
        st.status = doc.at("Status").get<std::string>();
        st.running = doc.at("Running").get<bool>();
        st.exit_code = doc.at("ExitCode").get<int>();
        st.oom_killed = doc.value("OOMKilled", false);
        st.ran = st.status != "created" && st.status != "configured";
        return st;
    } catch (const nlohmann::json::exception& e) {
        return make_error(ErrorCode::io, std::string("cannot read a container's state JSON: ") + e.what());
    }
}

Result<ImageIdentity> parse_image_identity(OciTool tool, std::string_view json, std::string_view reference) {
    nlohmann::json doc;
    try {
        doc = nlohmann::json::parse(json);
    } catch (const nlohmann::json::exception& e) {
        return make_error(ErrorCode::io, std::string("cannot read image inspect JSON: ") + e.what());
    }
    if (!doc.is_array() || doc.size() != 1 || !doc[0].is_object()) {
        return make_error(ErrorCode::io, "image inspect did not answer a JSON array of one image");
    }
    const auto& image = doc[0];
    ImageIdentity out;
    std::string digest = tool == OciTool::podman ? string_member(image, "Digest") : repo_digest(image, reference);
    std::string id = string_member(image, "Id");
    if (tool == OciTool::podman && !id.empty() && id.rfind("sha256:", 0) != 0) {
        id = "sha256:" + id; // podman's id is bare hex
    }
    out.digest = api::is_sha256_digest(digest) ? digest : std::string();
    out.id = api::is_sha256_digest(id) ? id : std::string();
    if (out.digest.empty() && out.id.empty()) {
        out.unknown = std::string(to_string(tool)) + " gave neither a valid digest nor a valid id for the image";
    }
    return out;
}

} // namespace gpupool::worker

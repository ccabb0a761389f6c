#include "cmd/manifest_diff.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <set>

namespace gpupool::cmd {

using nlohmann::json;

namespace {

constexpr const char* k_absent = "(absent)";

std::string shown(const json& v) {
    if (v.is_null()) {
        return k_absent;
    }
    return v.is_string() ? v.get<std::string>() : v.dump();
}

void compare(const std::string& field, const json& a, const json& b, std::vector<ManifestDifference>& out) {
    if (a != b) {
        out.push_back({field, shown(a), shown(b)});
    }
}

// An object's members compared one by one ("env.SEED").
void compare_members(const std::string& field, const json& a, const json& b, std::vector<ManifestDifference>& out) {
    std::set<std::string> keys;
    for (const json* side : {&a, &b}) {
        if (side->is_object()) {
            for (const auto& [k, v] : side->items()) {
                keys.insert(k);
            }
        }
    }
    for (const auto& k : keys) {
        compare(field + "." + k, a.is_object() && a.contains(k) ? a[k] : json(), b.is_object() && b.contains(k) ? b[k] : json(),
                out);
    }
}

// Models by name, each with its revision.
std::map<std::string, json> models_of(const json& m) {
    std::map<std::string, json> out;
    const json& models = manifest_member(m, "models");
    if (models.is_array()) {
        for (const auto& e : models) {
            if (e.is_object() && e.contains("model") && e["model"].is_string()) {
                out[e["model"].get<std::string>()] = e.contains("revision") ? e["revision"] : json();
            }
        }
    }
    return out;
}

// Files and links by path: "sha256 (N bytes)" or "-> target".
std::map<std::string, std::string> outputs_of(const json& m) {
    std::map<std::string, std::string> out;
    const json& entries = manifest_member(m, "outputs.entries");
    if (!entries.is_array()) {
        return out;
    }
    for (const auto& e : entries) {
        if (!e.is_object() || !e.contains("path") || !e["path"].is_string()) {
            continue;
        }
        const std::string type = e.value("type", "");
        if (type == "file") {
            out[e["path"].get<std::string>()] =
                shown(e.contains("sha256") ? e["sha256"] : json()) + " (" + shown(e.contains("size") ? e["size"] : json()) + " bytes)";
        } else if (type == "link") {
            out[e["path"].get<std::string>()] = "-> " + shown(e.contains("target") ? e["target"] : json());
        } else {
            out[e["path"].get<std::string>()] = type;
        }
    }
    return out;
}

} // namespace

const json& manifest_member(const json& j, std::string_view path) {
    static const json null;
    const json* cur = &j;
    std::size_t begin = 0;
    while (begin <= path.size()) {
        const std::size_t end = std::min(path.find('.', begin), path.size());
        const std::string key(path.substr(begin, end - begin));
        if (!cur->is_object() || !cur->contains(key)) {
            return null;
        }
        cur = &(*cur)[key];
        begin = end + 1;
    }
    return *cur;
}

std::vector<ManifestDifference> diff_manifests(const json& a, const json& b) {
    std::vector<ManifestDifference> out;
    for (const char* field : {"image.reference", "image.digest", "image.id", "command", "recipe.sha256", "recipe.origins",
                              "inputs.archive_sha256"}) {
        compare(field, manifest_member(a, field), manifest_member(b, field), out);
    }
    compare_members("env", manifest_member(a, "env"), manifest_member(b, "env"), out);
    compare_members("params", manifest_member(a, "job.params"), manifest_member(b, "job.params"), out);
    compare_members("resources", manifest_member(a, "resources"), manifest_member(b, "resources"), out);
    const auto ma = models_of(a);
    const auto mb = models_of(b);
    std::set<std::string> names;
    for (const auto* side : {&ma, &mb}) {
        for (const auto& [k, v] : *side) {
            names.insert(k);
        }
    }
    for (const auto& n : names) {
        compare("models." + n, ma.count(n) != 0 ? ma.at(n) : json(), mb.count(n) != 0 ? mb.at(n) : json(), out);
    }
    for (const char* field : {"worker.gpu_model", "worker.driver_version", "worker.cuda_version", "worker.enforcement",
                              "worker.runtime", "worker.version", "attempt.state", "attempt.exit_code"}) {
        compare(field, manifest_member(a, field), manifest_member(b, field), out);
    }
    compare("outputs.tree_sha256", manifest_member(a, "outputs.tree_sha256"), manifest_member(b, "outputs.tree_sha256"),
            out);
    const auto oa = outputs_of(a);
    const auto ob = outputs_of(b);
    std::set<std::string> paths;
    for (const auto* side : {&oa, &ob}) {
        for (const auto& [k, v] : *side) {
            paths.insert(k);
        }
    }
    for (const auto& p : paths) {
        const std::string va = oa.count(p) != 0 ? oa.at(p) : k_absent;
        const std::string vb = ob.count(p) != 0 ? ob.at(p) : k_absent;
        if (va != vb) {
            out.push_back({"outputs/" + p, va, vb});
        }
    }
    return out;
}

} // namespace gpupool::cmd

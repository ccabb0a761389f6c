#include "worker/runtime/oci_json.hpp"

#include <nlohmann/json.hpp>

namespace gpupool::worker {

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

} // namespace gpupool::worker

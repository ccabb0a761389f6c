#include "worker/runtime/runtime_registry.hpp"

#include "worker/runtime/oci_runtime.hpp"
#include "worker/runtime/process_runtime.hpp"

namespace gpupool::worker {

namespace {

Result<std::unique_ptr<ContainerRuntime>> make_oci(OciTool tool, const RuntimeArgs& args) {
    OciConfig config;
    config.tool = tool;
    config.global_args = args.runtime_args;
    config.run_args = args.run_args;
    auto runtime = std::make_unique<OciRuntime>(std::move(config));
    if (auto missing = runtime->missing_tool()) {
        return *missing;
    }
    return std::unique_ptr<ContainerRuntime>(std::move(runtime));
}

Result<std::unique_ptr<ContainerRuntime>> make_process(const RuntimeArgs& args) {
    if (!args.runtime_args.empty() || !args.run_args.empty()) {
        return make_error(ErrorCode::invalid_input, "the process runtime takes no runtime arguments", "runtime");
    }
    return std::unique_ptr<ContainerRuntime>(std::make_unique<ProcessRuntime>(args.state_dir, !args.warned));
}

} // namespace

const std::vector<RuntimeKind>& runtime_kinds() {
    static const std::vector<RuntimeKind> kinds{
        {"podman", "rootless containers (CDI for the GPU)", true,
         [](const RuntimeArgs& a) { return make_oci(OciTool::podman, a); }},
        {"docker", "containers through the docker daemon (--gpus for the GPU)", true,
         [](const RuntimeArgs& a) { return make_oci(OciTool::docker, a); }},
        {"process", "bare child processes: no isolation", false, make_process},
    };
    return kinds;
}

std::vector<std::string> runtime_names() {
    std::vector<std::string> names;
    for (const auto& k : runtime_kinds()) {
        names.push_back(k.name);
    }
    return names;
}

const RuntimeKind* find_runtime_kind(const std::string& name) {
    for (const auto& k : runtime_kinds()) {
        if (k.name == name) {
            return &k;
        }
    }
    return nullptr;
}

Result<std::unique_ptr<ContainerRuntime>> make_runtime(const std::string& kind,
                                                       const std::vector<std::string>& runtime_args,
                                                       const std::vector<std::string>& run_args,
                                                       const std::filesystem::path& state_dir) {
    const RuntimeKind* k = find_runtime_kind(kind);
    if (k == nullptr) {
        return make_error(ErrorCode::invalid_input, "unknown runtime `" + kind + "`; expected podman, docker or process",
                          "runtime");
    }
    return k->make({runtime_args, run_args, state_dir});
}

} // namespace gpupool::worker

#include "worker/runtime/container_runtime.hpp"

#include "worker/runtime/oci_runtime.hpp"
#include "worker/runtime/process_runtime.hpp"

namespace gpupool::worker {

Result<std::unique_ptr<ContainerRuntime>> make_runtime(const std::string& kind,
                                                       const std::vector<std::string>& runtime_args,
                                                       const std::vector<std::string>& run_args,
                                                       const std::filesystem::path& state_dir) {
    if (kind == "process") {
        if (!runtime_args.empty() || !run_args.empty()) {
            return make_error(ErrorCode::invalid_input, "the process runtime takes no runtime arguments", "runtime");
        }
        return std::unique_ptr<ContainerRuntime>(std::make_unique<ProcessRuntime>(state_dir));
    }
    if (kind == "podman" || kind == "docker") {
        OciConfig config;
        config.tool = kind == "podman" ? OciTool::podman : OciTool::docker;
        config.global_args = runtime_args;
        config.run_args = run_args;
        auto runtime = std::make_unique<OciRuntime>(std::move(config));
        if (auto missing = runtime->missing_tool()) {
            return *missing;
        }
        return std::unique_ptr<ContainerRuntime>(std::move(runtime));
    }
    return make_error(ErrorCode::invalid_input, "unknown runtime `" + kind + "`; expected podman, docker or process",
                      "runtime");
}

} // namespace gpupool::worker

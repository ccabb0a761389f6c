#include "worker/runtime/container_runtime.hpp"

#include "worker/runtime/process_runtime.hpp"

namespace gpupool::worker {

Result<std::unique_ptr<ContainerRuntime>> make_runtime(const std::string& kind,
                                                       const std::vector<std::string>& runtime_args) {
    if (kind == "process") {
        if (!runtime_args.empty()) {
            return make_error(ErrorCode::invalid_input, "the process runtime takes no runtime arguments", "runtime");
        }
        return std::unique_ptr<ContainerRuntime>(std::make_unique<ProcessRuntime>());
    }
    if (kind == "podman" || kind == "docker") {
        return make_error(ErrorCode::not_implemented, "the " + kind + " runtime has not landed yet", "runtime");
    }
    return make_error(ErrorCode::invalid_input, "unknown runtime `" + kind + "`; expected podman, docker or process",
                      "runtime");
}

} // namespace gpupool::worker

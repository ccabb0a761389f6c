#include "worker/agent/agent_setup.hpp"

#include "worker/agent/agent.hpp"

#include <cstdlib>
#include <filesystem>

namespace gpupool::worker {

namespace fs = std::filesystem;

Status prepare_agent_dirs(AgentOptions& opt) {
    std::error_code ec;
    fs::create_directories(opt.work_dir, ec);
    if (ec) {
        return make_error(ErrorCode::io, "cannot create work dir " + opt.work_dir.string() + ": " + ec.message());
    }
    if (opt.cache_dir.empty()) {
        opt.cache_dir = opt.work_dir / "cache";
    }
    fs::create_directories(opt.cache_dir, ec);
    if (opt.name.empty()) {
        opt.name = host_name();
    }
    return {};
}

HubOptions hub_options(const AgentOptions& opt) {
    HubOptions hub;
    const char* env_endpoint = std::getenv("HF_ENDPOINT");
    hub.endpoint = !opt.hub_endpoint.empty()                           ? opt.hub_endpoint
                   : env_endpoint != nullptr && *env_endpoint != '\0' ? std::string(env_endpoint)
                                                                      : hub.endpoint;
    hub.token = opt.hub_token;
    return hub;
}

} // namespace gpupool::worker

// The worker's identity file under its work dir: worker.json. Declared in agent.hpp (the owner's
// pause file is worker/owner/pause_file.hpp).
#include "core/util/files.hpp"
#include "worker/agent/agent.hpp"
#include "worker/agent/spool.hpp"

#include <chrono>
#include <ctime>
#include <fstream>

namespace gpupool::worker {

namespace fs = std::filesystem;
using nlohmann::json;

std::optional<StoredIdentity> read_stored_identity(const fs::path& work_dir) {
    auto j = read_json_file(work_dir / "worker.json");
    if (!j || !j->is_object()) {
        return std::nullopt;
    }
    try {
        StoredIdentity id{j->value("coordinator", ""), j->value("worker_id", std::int64_t{0}), j->value("token", ""),
                          j->value("instance", "")};
        if (id.coordinator.empty() || id.worker_id <= 0 || id.token.empty()) {
            return std::nullopt;
        }
        return id;
    } catch (const json::exception&) {
        return std::nullopt; // a field of the wrong type: not an identity
    }
}

} // namespace gpupool::worker

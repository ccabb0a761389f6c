// The worker's files under its work dir besides the spool: worker.json (its identity) and paused
// (the owner's pause). Declared in agent.hpp.
#include "core/util/files.hpp"
#include "worker/agent/agent.hpp"
#include "worker/agent/spool.hpp"

#include <chrono>
#include <ctime>
#include <fstream>

namespace gpupool::worker {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
const char* const k_pause_file = "paused";
} // namespace

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

Status pause_sharing(const fs::path& work_dir, const std::string& why) {
    std::error_code ec;
    fs::create_directories(work_dir, ec);
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    std::tm utc{};
    gmtime_r(&t, &utc);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &utc);
    return util::write_private_file(work_dir / k_pause_file, std::string(when) + (why.empty() ? "" : ": " + why) + "\n");
}

Status resume_sharing(const fs::path& work_dir) {
    std::error_code ec;
    fs::remove(work_dir / k_pause_file, ec);
    if (ec) {
        return make_error(ErrorCode::io, "cannot remove " + (work_dir / k_pause_file).string() + ": " + ec.message());
    }
    return {};
}

std::optional<std::string> paused_since(const fs::path& work_dir) {
    std::error_code ec;
    if (!fs::exists(work_dir / k_pause_file, ec)) {
        return std::nullopt;
    }
    std::ifstream in(work_dir / k_pause_file);
    std::string line;
    std::getline(in, line);
    return line.substr(0, 200);
}

} // namespace gpupool::worker

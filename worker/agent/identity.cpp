#include "worker/agent/identity.hpp"

#include "core/net/url.hpp"
#include "worker/agent/spool.hpp"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>

namespace gpupool::worker {

namespace fs = std::filesystem;
using nlohmann::json;

bool same_pool(const std::string& stored, const std::string& configured) {
    if (stored == configured) {
        return true;
    }
    const auto mine = net::split_url_list(configured);
    for (const auto& url : net::split_url_list(stored)) {
        if (url.starts_with("http") && std::find(mine.begin(), mine.end(), url) != mine.end()) {
            return true;
        }
    }
    return false;
}

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

Status write_stored_identity(const fs::path& work_dir, const StoredIdentity& id) {
    return write_json_file(work_dir / "worker.json", json{{"coordinator", id.coordinator},
                                                          {"worker_id", id.worker_id},
                                                          {"token", id.token},
                                                          {"instance", id.instance}});
}

std::string new_instance_id() {
    std::random_device rd;
    const std::uint64_t bits = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(bits));
    return hex;
}

bool is_instance_id(const std::string& s) {
    return s.size() == 16 && std::all_of(s.begin(), s.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

std::string host_name() {
    char buf[256] = {};
    if (gethostname(buf, sizeof buf - 1) != 0) {
        return "worker";
    }
    return buf;
}

std::int64_t total_memory_mib() {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) {
        return 0;
    }
    return static_cast<std::int64_t>(pages) * page / (1024 * 1024);
}

Result<StoredIdentity> establish_identity(const std::filesystem::path& work_dir, const std::string& pool,
                                          const std::function<Result<StoredIdentity>()>& register_now) {
    StoredIdentity id;
    bool rewrite = false;
    if (auto stored = read_stored_identity(work_dir); stored && same_pool(stored->coordinator, pool)) {
        id = *stored;
        rewrite = stored->coordinator != pool; // a standby's URL added or dropped
    }
    id.coordinator = pool;
    if (!is_instance_id(id.instance)) {
        // A new worker, or a worker.json from before instances existed (its containers, named
        // the old way, are not recognised: attempts running across that upgrade are reported lost).
        id.instance = new_instance_id();
        rewrite = true;
    }
    if (id.worker_id == 0 || id.token.empty()) {
        auto fresh = register_now();
        if (!fresh) {
            return fresh.error();
        }
        id.worker_id = fresh->worker_id;
        id.token = fresh->token;
        rewrite = true;
    }
    if (rewrite) {
        if (auto st = write_stored_identity(work_dir, id); !st) {
            return st.error();
        }
    }
    return id;
}

} // namespace gpupool::worker

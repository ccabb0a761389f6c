// Who this worker is: the identity kept in <work_dir>/worker.json (its pool, id, own token and
// machine-unique instance id) and the machine facts a first registration reports (its host name and
// memory). The owner's pause file is worker/owner/pause_file.hpp.
#pragma once

#include "core/util/result.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace gpupool::worker {

// What <work_dir>/worker.json holds: the pool it belongs to (`identity_key`, or the coordinator URL),
// the worker's id and own token, and its machine-unique instance id ("" in a file from before
// instances existed). nullopt when there is no registered identity. A start with one for its pool
// needs no enrollment token; `gpupool worker status` reads the team's credits with it.
struct StoredIdentity {
    std::string coordinator;
    std::int64_t worker_id = 0;
    std::string token;
    std::string instance;
};
std::optional<StoredIdentity> read_stored_identity(const std::filesystem::path& work_dir);
// Whether a stored identity's pool is the configured one: the same key, or coordinator URL lists
// (`URL1,URL2`: an active coordinator and its standbys) that share a URL, so an owner who adds or
// drops a standby's URL keeps the worker's identity.
bool same_pool(const std::string& stored, const std::string& configured);
// Writes worker.json (0600: it holds the worker's token) atomically.
Status write_stored_identity(const std::filesystem::path& work_dir, const StoredIdentity& id);

// 16 lowercase hex digits from std::random_device; is_instance_id accepts exactly that shape.
std::string new_instance_id();
bool is_instance_id(const std::string& s);

// The identity a start works with: the stored one when it belongs to `pool` (same_pool), else a new
// one from `register_now` (which registers with the coordinator and returns the new id and token).
// A stored file from before instances existed gets a new instance id. worker.json is rewritten when
// anything changed (a new registration or instance, a standby's URL added or dropped).
Result<StoredIdentity> establish_identity(const std::filesystem::path& work_dir, const std::string& pool,
                                          const std::function<Result<StoredIdentity>()>& register_now);

std::string host_name();         // "worker" when gethostname fails
std::int64_t total_memory_mib(); // 0 when sysconf cannot say

} // namespace gpupool::worker

// HubFetcher: downloads a model from a Hugging Face hub (huggingface.co, a mirror, or HF_ENDPOINT) into the
// worker's HubCache (hub_cache.hpp), so that the jobs which need it find it offline.
//
// What it asks (libcurl; the same calls huggingface_hub makes):
//   GET {endpoint}/api/models/{repo}/revision/{revision}?blobs=true   the commit and its files
//   GET {endpoint}/{repo}/resolve/{commit}/{rfilename}                 each file's bytes (may redirect to a CDN)
//
// Rules:
// - Every byte from the hub is hostile until checked. The answer about the revision must be a JSON object
//   whose commit is 40 hex, whose files are at most HubOptions::max_files with safe relative names
//   (check_rfilename), lowercase hex hashes of the right length and sizes that add up to at most
//   max_model_bytes; anything else is an invalid_input Error naming the field (`siblings[3].rfilename`).
//   A file is never written past its declared size.
// - Blobs are downloaded to blobs/<hash>.incomplete and resumed from where they stopped (`Range: bytes=N-`;
//   a 206 continues, a 200 starts again from zero). A transfer that fails midway is resumed up to twice
//   within the same fetch. Then each is verified: an LFS file's SHA-256 and a git file's blob SHA-1 (of
//   "blob <size>\0" and the bytes) must match the hub's, and the size the declared one; a mismatch deletes
//   the partial blob and fails naming the file, the expected and the got hash. Only then is it renamed to
//   blobs/<hash>. Blobs already there are not downloaded again (their hash is their name).
// - Redirects are followed (at most 5, http and https only). The token goes only to the endpoint's
//   host:port and scheme (libcurl's bearer auth, never to a host a redirect leads to); 401/403 say the model
//   is gated or private and that the owner sets `hf_token_file` in worker.toml; 404 says there is no such
//   model or revision.
// - Before downloading, the cache evicts for the bytes missing (pinned models and the one fetched stay),
//   and the fetch fails (ErrorCode::unavailable) when the cap or the free space is still short.
// - A transfer slower than 1 byte/s for stall_timeout is aborted (ErrorCode::unavailable).
// - progress() is called on the fetching thread as bytes arrive, at most about 10 times a second; returning
//   false cancels: the partial blob stays for a later resume and fetch() returns an Error for which
//   is_fetch_cancelled() is true.
// Thread safety: a HubFetcher is used by one thread at a time (fetch() blocks); several fetchers may share
// one HubCache.
#pragma once

#include "core/util/result.hpp"
#include "worker/cache/hub_cache.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::worker {

struct HubOptions {
    std::string endpoint = "https://huggingface.co"; // HF_ENDPOINT overrides it (the caller reads the env)
    std::string token;                               // for gated models; sent only to the endpoint's host
    std::string ca_cert;                             // optional CA bundle file
    std::chrono::milliseconds connect_timeout{15'000};
    std::chrono::milliseconds stall_timeout{60'000}; // abort a transfer under 1 byte/s for this long
    std::int64_t max_files = 10'000;
    std::int64_t max_model_bytes = 1LL << 40;
};

struct FetchProgress {
    std::int64_t done_bytes = 0;  // of the revision's blobs: already there, resumed, or downloaded now
    std::int64_t total_bytes = 0; // all of the revision's blobs
};

// One file of a revision, as the hub describes it.
struct HubFile {
    std::string rfilename;
    std::int64_t size = 0;
    std::string blob_id;                   // git blob SHA-1, 40 hex
    std::optional<std::string> lfs_sha256; // 64 hex, for LFS files
    // Its name in blobs/: the LFS SHA-256, else the git blob id.
    const std::string& blob() const { return lfs_sha256 ? *lfs_sha256 : blob_id; }
};
struct HubRevision {
    std::string commit; // 40 hex
    std::vector<HubFile> files;
    std::int64_t total_bytes = 0; // of distinct blobs
};

// Reads and checks the hub's answer to the revision query (the rules above). Pure.
Result<HubRevision> parse_hub_revision(std::string_view json, const HubOptions& o);

// The field a cancelled fetch's Error carries.
inline constexpr std::string_view k_fetch_cancelled = "cancelled";
inline bool is_fetch_cancelled(const Error& e) {
    return e.code == ErrorCode::unavailable && e.field == k_fetch_cancelled;
}

class HubFetcher {
public:
    HubFetcher(HubOptions o, HubCache& cache);

    // Makes `m` complete in the cache: asks the hub which files the revision has, downloads the missing blobs
    // (resuming partial ones), verifies each, links the snapshot, writes refs/<revision>, records it with
    // last use `now_ms`. Blocking, on a thread of the caller's.
    Status fetch(const ModelRef& m, const std::set<std::string>& pinned,
                 const std::function<bool(const FetchProgress&)>& progress, std::int64_t now_ms);

    const HubOptions& options() const { return m_options; }

private:
    HubOptions m_options;
    HubCache& m_cache;
};

} // namespace gpupool::worker

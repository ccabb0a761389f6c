// HubCache: the worker's model-weight cache, laid out as Hugging Face's hub cache.
//
// A job whose recipe names a model gets the cache's root read-only at /cache with HF_HOME=/cache, and
// transformers / huggingface_hub then find the weights there offline. The worker owns the cache: its
// fetcher (hub_fetch.hpp) alone writes under hub/, and HubCache alone decides what is evicted.
//
// Layout (huggingface_hub's own, so that HF_HOME=<root> works unchanged):
//   <root>/hub/models--{org}--{name}/blobs/<hash>           a file's bytes: the SHA-256 of an LFS file,
//                                                           the git blob SHA-1 of any other
//   <root>/hub/models--{org}--{name}/snapshots/<commit>/<rfilename>
//                                                           a relative symlink to ../../blobs/<hash>
//                                                           (one more ../ per folder in rfilename)
//   <root>/hub/models--{org}--{name}/refs/<revision>        the commit the revision resolved to, no
//                                                           newline (none when the revision is the commit)
//   <root>/models.json                                      gpupool's index, outside hub/
//
// Rules:
// - Complete is what the index lists. A folder that it does not list (a fetch cut short, an index that was
//   lost) counts as missing and is fetched again, which downloads only the blobs that are not there.
// - The index is rewritten atomically (temp file, fsync, rename) on every change. One that cannot be read
//   or understood at construction is logged and replaced by an empty one, never a crash.
// - Eviction removes whole models--* folders, least recently used first (touch() marks a use; ties by
//   repo), never a repo in `pinned`. The agent pins the models of running and starting jobs; the fetcher
//   adds the model it fetches.
// - used_bytes() is the sum, over complete repos, of their blobs on disk (measured when recorded): blobs
//   shared by two revisions count once.
// - Nothing is written outside the root, and no symlink found on disk is followed when writing: one where
//   a folder, a blob or a snapshot file should be is removed and made again. Only our own snapshot links
//   are symlinks.
// - Files and folders under hub/ are world-readable (0644 / 0755): jobs may run as another user.
// Thread-safe: one fetch thread writes while the agent thread reads.
#pragma once

#include "core/util/result.hpp"
#include "core/util/thread_safety.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::worker {

// A model as a recipe names it: "org/name" (or "name"), as recipe::check_model_id accepts, and neither
// "--" nor ".." in it (huggingface_hub refuses both, and "--" would make two repos share a folder);
// optionally "@revision": a branch, tag or commit of [A-Za-z0-9._-/], at most 128 characters, without
// "..", empty or "." segments, or a leading or trailing "/".
struct ModelRef {
    std::string repo;
    std::string revision = "main";
    // "org/name" for main, else "org/name@revision".
    std::string id() const;
    bool operator==(const ModelRef&) const = default;
};
Result<ModelRef> parse_model_ref(std::string_view id);

struct CachedModel {
    std::string repo;       // "org/name"
    std::string revision;   // as asked ("main")
    std::string commit;     // 40 hex, what the revision resolved to
    std::int64_t bytes = 0; // the sum of this revision's blobs
    std::int64_t last_used_ms = 0;
    bool operator==(const CachedModel&) const = default;
};

class HubCache {
public:
    // Creates <root>/hub when missing (a failure is logged; fetches then fail with the reason) and reads
    // the index.
    HubCache(std::filesystem::path root, std::int64_t cap_bytes /* 0 = no cap */);

    const std::filesystem::path& root() const { return m_root; } // what jobs get read-only at /cache (HF_HOME)
    std::filesystem::path hub_dir() const { return m_root / "hub"; }
    // <root>/hub/models--{org}--{name}; `repo` must be valid (a ModelRef's).
    std::filesystem::path model_dir(std::string_view repo) const;

    std::vector<CachedModel> list() const; // complete models only, sorted by repo, then revision
    bool has(const ModelRef& m) const;     // complete at that revision (and its snapshot still on disk)
    // The commit `m`'s revision resolved to when it was fetched ("main" -> 40 hex), the snapshot a job
    // reading the cache sees; nullopt unless has(m).
    std::optional<std::string> commit_of(const ModelRef& m) const;
    void touch(const ModelRef& m, std::int64_t now_ms);
    std::int64_t used_bytes() const;
    std::int64_t free_bytes() const; // statvfs of the root's file system: bytes available (0 when it fails)
    std::int64_t cap_bytes() const { return m_cap; }

    // Removes least-recently-used complete repos (their whole models--* folder) until used + need_bytes <=
    // cap, skipping those in `pinned`. Removes nothing when the cap is 0, or when even removing every repo
    // not pinned would not make room (the caller's fetch fails either way; the models stay for later jobs).
    // Returns the repos removed, oldest first.
    std::vector<std::string> evict_for(std::int64_t need_bytes, const std::set<std::string>& pinned);

    // The fetcher marks a model complete; its snapshot must be on disk. Fails (invalid_input) on a bad
    // repo, revision or commit, or (io) when the index cannot be written: the model then counts as
    // complete until the worker restarts.
    Status record(const CachedModel& m);

private:
    struct Revision {
        std::string commit;
        std::int64_t bytes = 0;
    };
    struct Entry {
        std::map<std::string, Revision> revisions; // by revision
        std::int64_t disk_bytes = 0;
        std::int64_t last_used_ms = 0;
    };
    void load();
    Status save() REQUIRES(m_mu);

    const std::filesystem::path m_root;
    const std::int64_t m_cap;
    mutable util::Mutex m_mu;
    std::map<std::string, Entry> m_models GUARDED_BY(m_mu); // by repo
};

// ---- the layout, for the fetcher ---------------------------------------------------------------------------
// Those that touch the disk fail with an io Error naming the path and the system's reason.

// "org/name" -> "models--org--name".
std::string model_folder_name(std::string_view repo);

// A file name as the hub lists it (siblings[].rfilename), safe to place under a snapshot: relative, at
// most 1024 characters, '/'-separated segments that are neither empty, "." nor "..", nor longer than 255,
// no backslash, no control character. invalid_input saying what is wrong.
Status check_rfilename(std::string_view rfilename);
// `text` is exactly `length` lowercase hex digits.
bool is_lower_hex(std::string_view text, std::size_t length);

// A blob's name is its content's hash: the SHA-256 of an LFS file (util::sha256_file_hex), the git blob id
// of any other: the SHA-1 of "blob <size>\0" and the bytes, as here (hex; an io Error when unreadable).
Result<std::string> git_blob_sha1_file(const std::filesystem::path& file);

// Makes `base`/`relative` a real folder (0755), one segment at a time: a symlink or file in the way is
// removed, never followed. `base` must exist and is trusted.
Status ensure_real_dir(const std::filesystem::path& base, const std::filesystem::path& relative);

// One file of a snapshot and the blob (its name in blobs/) that holds its bytes.
struct SnapshotFile {
    std::string rfilename;
    std::string blob;
};
// Creates snapshots/<commit>/<rfilename> -> ../../blobs/<blob> (more ../ when nested) for each file under
// `model_dir`, leaving a correct link as it is and replacing anything else there.
Status link_snapshot(const std::filesystem::path& model_dir, std::string_view commit,
                     const std::vector<SnapshotFile>& files);
// Writes refs/<revision> = commit atomically (0644); nothing when the revision is the commit itself.
Status write_ref(const std::filesystem::path& model_dir, std::string_view revision, std::string_view commit);
// Writes `bytes` to `path` through a temporary file beside it (fsync, rename), mode 0644.
Status write_public_file(const std::filesystem::path& path, std::string_view bytes);

} // namespace gpupool::worker

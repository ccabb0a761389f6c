#include "worker/cache/hub_cache.hpp"

#include "core/recipe/field_rules.hpp"
#include "core/util/files.hpp"
#include "core/util/sha256.hpp"
#include "core/util/strings.hpp"

#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <utility>

namespace gpupool::worker {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t k_max_rfilename = 1024;
constexpr std::size_t k_max_segment = 255;
constexpr int k_index_version = 1;

Error io_error(const std::string& what, const fs::path& path, const std::string& why) {
    return make_error(ErrorCode::io, what + " " + path.string() + ": " + why);
}

// Calls `each` with every '/'-separated segment of `text` (empty ones included).
template <class F>
bool all_segments(std::string_view text, F each) {
    std::size_t start = 0;
    while (true) {
        const std::size_t slash = text.find('/', start);
        const std::string_view seg = text.substr(start, slash == std::string_view::npos ? slash : slash - start);
        if (!each(seg)) {
            return false;
        }
        if (slash == std::string_view::npos) {
            return true;
        }
        start = slash + 1;
    }
}

Status check_revision(std::string_view rev) {
    if (auto st = recipe::check_model_revision(rev); !st) {
        return invalid_input(st.error().message, "revision");
    }
    return {};
}

// Regular files in `dir` (not followed through symlinks), partial downloads left out.
std::int64_t blob_bytes(const fs::path& dir) {
    std::int64_t sum = 0;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        std::error_code st_ec;
        const auto st = it->symlink_status(st_ec);
        if (st_ec || !fs::is_regular_file(st) || it->path().filename().string().ends_with(".incomplete")) {
            continue;
        }
        const auto size = it->file_size(st_ec);
        if (!st_ec) {
            sum += static_cast<std::int64_t>(size);
        }
    }
    return sum;
}


// Removes whatever is at `p` without following it (a symlink goes, not what it points to).
Status remove_in_the_way(const fs::path& p) {
    std::error_code ec;
    fs::remove_all(p, ec);
    if (ec) {
        return io_error("cannot remove", p, ec.message());
    }
    return {};
}

} // namespace

// ---- ModelRef ----------------------------------------------------------------------------------------------

std::string ModelRef::id() const {
    return revision == "main" ? repo : repo + "@" + revision;
}

Result<ModelRef> parse_model_ref(std::string_view id) {
    const std::size_t at = id.find('@');
    const std::string_view repo = id.substr(0, at);
    if (auto st = recipe::check_model_id(repo); !st) {
        return invalid_input(st.error().message, "model");
    }
    if (repo.find("--") != std::string_view::npos || repo.find("..") != std::string_view::npos) {
        return invalid_input("`" + std::string(repo) + "` is not a hub model id: `--` and `..` are not allowed in one",
                       "model");
    }
    ModelRef m;
    m.repo = std::string(repo);
    if (at != std::string_view::npos) {
        const std::string_view rev = id.substr(at + 1);
        if (auto st = check_revision(rev); !st) {
            return st.error();
        }
        m.revision = std::string(rev);
    }
    return m;
}

// ---- layout ------------------------------------------------------------------------------------------------

std::string model_folder_name(std::string_view repo) {
    std::string out = "models--";
    for (char c : repo) {
        if (c == '/') {
            out += "--";
        } else {
            out += c;
        }
    }
    return out;
}

bool is_lower_hex(std::string_view text, std::size_t length) {
    return text.size() == length && text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

Status check_rfilename(std::string_view name) {
    if (name.empty() || name.size() > k_max_rfilename) {
        return invalid_input("a file name must be 1 to 1024 characters long");
    }
    if (recipe::has_control_character(name) || name.find('\\') != std::string_view::npos) {
        return invalid_input("`" + util::escape_control(name) + "` holds a control character or a backslash");
    }
    if (name.front() == '/') {
        return invalid_input("`" + std::string(name) + "` is an absolute path; the hub's file names are relative");
    }
    const bool ok = all_segments(name, [](std::string_view seg) {
        return !seg.empty() && seg != "." && seg != ".." && seg.size() <= k_max_segment;
    });
    if (!ok) {
        return invalid_input("`" + std::string(name) +
                       "` has an empty, `.` or `..` segment (or one over 255 characters); it could lead outside the "
                       "snapshot");
    }
    return {};
}

Status ensure_real_dir(const fs::path& base, const fs::path& relative) {
    fs::path cur = base;
    for (const auto& part : relative) {
        if (part.empty()) {
            continue; // a trailing separator
        }
        if (part == "." || part == ".." || part.is_absolute() || part == "/") {
            return invalid_input("`" + relative.string() + "` is not a plain relative folder");
        }
        cur /= part;
        std::error_code ec;
        const auto st = fs::symlink_status(cur, ec);
        if (!ec && fs::is_directory(st)) {
            continue;
        }
        if (!ec && fs::exists(st)) {
            if (auto r = remove_in_the_way(cur); !r) {
                return r;
            }
        }
        if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
            return io_error("cannot create", cur, std::strerror(errno));
        }
        const auto again = fs::symlink_status(cur, ec);
        if (ec || !fs::is_directory(again)) {
            return io_error("cannot create", cur, "something else appeared there");
        }
        ::chmod(cur.c_str(), 0755);
    }
    return {};
}

Status link_snapshot(const fs::path& model_dir, std::string_view commit, const std::vector<SnapshotFile>& files) {
    if (!is_lower_hex(commit, 40)) {
        return invalid_input("a commit is 40 lowercase hex digits", "sha");
    }
    const fs::path snapshot = fs::path("snapshots") / std::string(commit);
    if (auto st = ensure_real_dir(model_dir, snapshot); !st) {
        return st;
    }
    for (const auto& f : files) {
        if (auto st = check_rfilename(f.rfilename); !st) {
            return st;
        }
        if (!is_lower_hex(f.blob, 40) && !is_lower_hex(f.blob, 64)) {
            return invalid_input("`" + f.blob + "` is not a blob name (40 or 64 lowercase hex digits)");
        }
        const fs::path rel(f.rfilename);
        if (auto st = ensure_real_dir(model_dir, snapshot / rel.parent_path()); !st) {
            return st;
        }
        const auto depth = static_cast<std::size_t>(std::count(f.rfilename.begin(), f.rfilename.end(), '/'));
        std::string target;
        for (std::size_t i = 0; i < depth + 2; ++i) {
            target += "../";
        }
        target += "blobs/" + f.blob;
        const fs::path link = model_dir / snapshot / rel;
        std::error_code ec;
        const auto st = fs::symlink_status(link, ec);
        if (!ec && fs::is_symlink(st) && fs::read_symlink(link, ec) == fs::path(target) && !ec) {
            continue;
        }
        if (!ec && fs::exists(st)) {
            if (auto r = remove_in_the_way(link); !r) {
                return r;
            }
        }
        fs::create_symlink(target, link, ec);
        if (ec) {
            return io_error("cannot link", link, ec.message());
        }
    }
    return {};
}

Status write_public_file(const fs::path& path, std::string_view bytes) {
    return util::write_file_atomically(path, bytes, 0644);
}

Status write_ref(const fs::path& model_dir, std::string_view revision, std::string_view commit) {
    if (revision == commit) {
        return {};
    }
    if (auto st = check_revision(revision); !st) {
        return st;
    }
    const fs::path rel = fs::path("refs") / std::string(revision);
    if (auto st = ensure_real_dir(model_dir, rel.parent_path()); !st) {
        return st;
    }
    const fs::path ref = model_dir / rel;
    std::error_code ec;
    const auto st = fs::symlink_status(ref, ec);
    if (!ec && fs::exists(st) && !fs::is_regular_file(st)) {
        if (auto r = remove_in_the_way(ref); !r) {
            return r;
        }
    }
    return write_public_file(ref, commit);
}

Result<std::string> git_blob_sha1_file(const fs::path& file) {
    std::error_code ec;
    const auto size = fs::file_size(file, ec);
    std::ifstream in(file, std::ios::binary);
    if (ec || !in) {
        return make_error(ErrorCode::io, "cannot read " + file.string());
    }
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha1(), nullptr) != 1) {
        return make_error(ErrorCode::internal, "cannot set up SHA-1");
    }
    const std::string header = "blob " + std::to_string(size) + std::string(1, '\0');
    EVP_DigestUpdate(ctx.get(), header.data(), header.size());
    std::vector<char> buf(std::size_t{1} << 20);
    std::uintmax_t total_read = 0;
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        if (in.gcount() > 0) {
            EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<std::size_t>(in.gcount()));
            total_read += static_cast<std::uintmax_t>(in.gcount());
        }
    }
    if (in.bad() || total_read != size) {
        return make_error(ErrorCode::io, "cannot read " + file.string());
    }
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx.get(), digest.data(), &len);
    return util::to_hex(digest.data(), len);
}

// ---- HubCache ----------------------------------------------------------------------------------------------

HubCache::HubCache(fs::path root, std::int64_t cap_bytes)
    : m_root(std::move(root)), m_cap(std::max<std::int64_t>(0, cap_bytes)) {
    std::error_code ec;
    fs::create_directories(m_root, ec);
    if (!ec) {
        if (auto st = ensure_real_dir(m_root, "hub"); !st) {
            spdlog::warn("model cache: {}", st.error().message);
        }
    } else {
        spdlog::warn("model cache: cannot create {}: {}", m_root.string(), ec.message());
    }
    load();
}

fs::path HubCache::model_dir(std::string_view repo) const {
    return hub_dir() / model_folder_name(repo);
}

void HubCache::load() {
    const fs::path file = m_root / "models.json";
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(file, ec))) {
        return;
    }
    std::ifstream in(file, std::ios::binary);
    std::stringstream text;
    if (in) {
        text << in.rdbuf();
    }
    std::map<std::string, Entry> models;
    std::string problem;
    try {
        const auto j = nlohmann::json::parse(text.str()); // throws on an empty or unopened file
        if (j.at("version").get<int>() != k_index_version) {
            problem = "unknown version";
        }
        for (const auto& m : j.at("models")) {
            const auto repo = m.at("repo").get<std::string>();
            Entry e;
            e.disk_bytes = m.at("disk_bytes").get<std::int64_t>();
            e.last_used_ms = m.at("last_used_ms").get<std::int64_t>();
            for (const auto& r : m.at("revisions")) {
                const auto rev = r.at("revision").get<std::string>();
                Revision v{r.at("commit").get<std::string>(), r.at("bytes").get<std::int64_t>()};
                const auto ref = parse_model_ref(repo + "@" + rev);
                if (!ref || ref->repo != repo || !is_lower_hex(v.commit, 40) || v.bytes < 0) {
                    problem = "a bad entry for " + util::escape_control(repo);
                }
                e.revisions[rev] = v;
            }
            if (e.disk_bytes < 0 || e.revisions.empty() || !models.emplace(repo, std::move(e)).second) {
                problem = "a bad entry for " + util::escape_control(repo);
            }
        }
    } catch (const nlohmann::json::exception& e) {
        problem = e.what();
    }
    if (!problem.empty()) {
        spdlog::warn("model cache: the index {} is unreadable ({}); starting empty: its models will be fetched again",
                     file.string(), problem);
        return;
    }
    util::MutexLock lock(m_mu);
    m_models = std::move(models);
}

Status HubCache::save() {
    auto models = nlohmann::json::array();
    for (const auto& [repo, e] : m_models) {
        auto revisions = nlohmann::json::array();
        for (const auto& [rev, v] : e.revisions) {
            revisions.push_back({{"revision", rev}, {"commit", v.commit}, {"bytes", v.bytes}});
        }
        models.push_back({{"repo", repo},
                          {"disk_bytes", e.disk_bytes},
                          {"last_used_ms", e.last_used_ms},
                          {"revisions", std::move(revisions)}});
    }
    const nlohmann::json j = {{"version", k_index_version}, {"models", std::move(models)}};
    return util::write_private_file(m_root / "models.json", j.dump(2) + "\n");
}

std::vector<CachedModel> HubCache::list() const {
    std::vector<CachedModel> out;
    util::MutexLock lock(m_mu);
    for (const auto& [repo, e] : m_models) { // a std::map: sorted by repo, then revision
        for (const auto& [rev, v] : e.revisions) {
            out.push_back({repo, rev, v.commit, v.bytes, e.last_used_ms});
        }
    }
    return out;
}

bool HubCache::has(const ModelRef& m) const {
    return commit_of(m).has_value();
}

std::optional<std::string> HubCache::commit_of(const ModelRef& m) const {
    std::string commit;
    {
        util::MutexLock lock(m_mu);
        const auto it = m_models.find(m.repo);
        if (it == m_models.end()) {
            return std::nullopt;
        }
        const auto rev = it->second.revisions.find(m.revision);
        if (rev == it->second.revisions.end()) {
            return std::nullopt;
        }
        commit = rev->second.commit;
    }
    std::error_code ec;
    if (!fs::is_directory(fs::symlink_status(model_dir(m.repo) / "snapshots" / commit, ec))) {
        return std::nullopt;
    }
    return commit;
}

void HubCache::touch(const ModelRef& m, std::int64_t now_ms) {
    util::MutexLock lock(m_mu);
    const auto it = m_models.find(m.repo);
    if (it == m_models.end()) {
        return;
    }
    it->second.last_used_ms = now_ms;
    if (auto st = save(); !st) {
        spdlog::warn("model cache: {}", st.error().message);
    }
}

std::int64_t HubCache::used_bytes() const {
    util::MutexLock lock(m_mu);
    std::int64_t sum = 0;
    for (const auto& [repo, e] : m_models) {
        sum += e.disk_bytes;
    }
    return sum;
}

std::int64_t HubCache::free_bytes() const {
    struct statvfs st {};
    if (::statvfs(m_root.c_str(), &st) != 0) {
        spdlog::warn("model cache: statvfs {}: {}", m_root.string(), std::strerror(errno));
        return 0;
    }
    std::uint64_t avail = 0;
    if (__builtin_mul_overflow(static_cast<std::uint64_t>(st.f_bavail), static_cast<std::uint64_t>(st.f_frsize),
                               &avail) ||
        avail > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return std::numeric_limits<std::int64_t>::max();
    }
    return static_cast<std::int64_t>(avail);
}

std::vector<std::string> HubCache::evict_for(std::int64_t need_bytes, const std::set<std::string>& pinned) {
    std::vector<std::string> removed;
    if (m_cap == 0) {
        return removed;
    }
    {
        util::MutexLock lock(m_mu);
        std::vector<std::pair<std::int64_t, std::string>> order; // (last use, repo): oldest first
        std::int64_t used = 0;
        std::int64_t evictable = 0;
        for (const auto& [repo, e] : m_models) {
            used += e.disk_bytes;
            if (!pinned.contains(repo)) {
                order.emplace_back(e.last_used_ms, repo);
                evictable += e.disk_bytes;
            }
        }
        if (used - evictable + need_bytes > m_cap) {
            return removed; // even evicting every model not pinned would not make room: keep them
        }
        std::sort(order.begin(), order.end());
        for (const auto& [last_used, repo] : order) {
            if (used + need_bytes <= m_cap) {
                break;
            }
            used -= m_models[repo].disk_bytes;
            m_models.erase(repo);
            removed.push_back(repo);
        }
        if (removed.empty()) {
            return removed;
        }
        // The index first: a crash between the two leaves folders the index does not list (fetched again
        // when asked for), never an index naming folders that are gone.
        if (auto st = save(); !st) {
            spdlog::warn("model cache: {}", st.error().message);
        }
    }
    for (const auto& repo : removed) {
        spdlog::info("model cache: evicting {}", repo);
        if (auto st = remove_in_the_way(model_dir(repo)); !st) {
            spdlog::warn("model cache: {}", st.error().message);
        }
    }
    return removed;
}

Status HubCache::record(const CachedModel& m) {
    auto ref = parse_model_ref(m.repo + "@" + m.revision);
    if (!ref) {
        return ref.error();
    }
    if (ref->repo != m.repo) {
        return invalid_input("`" + util::escape_control(m.repo) + "` is not a model id", "repo");
    }
    if (!is_lower_hex(m.commit, 40) || m.bytes < 0) {
        return invalid_input("a commit is 40 lowercase hex digits and bytes are not negative", "commit");
    }
    const fs::path dir = model_dir(m.repo);
    std::error_code ec;
    if (!fs::is_directory(fs::symlink_status(dir / "snapshots" / m.commit, ec))) {
        return make_error(ErrorCode::not_found, "no snapshot of " + ref->id() + " at " + m.commit + " on disk");
    }
    const std::int64_t disk = blob_bytes(dir / "blobs");
    util::MutexLock lock(m_mu);
    Entry& e = m_models[m.repo];
    e.revisions[m.revision] = Revision{m.commit, m.bytes};
    e.disk_bytes = disk;
    e.last_used_ms = std::max(e.last_used_ms, m.last_used_ms);
    return save();
}

} // namespace gpupool::worker

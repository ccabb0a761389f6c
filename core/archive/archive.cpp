#include "core/archive/archive.hpp"

#include "core/util/strings.hpp"
#include "core/util/tree_fd.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <system_error>
#include <utility>

namespace gpupool::archive {

namespace fs = std::filesystem;
using util::UniqueFd;

namespace {

struct WriterDeleter {
    void operator()(::archive* a) const { archive_write_free(a); }
};
struct ReaderDeleter {
    void operator()(::archive* a) const { archive_read_free(a); }
};
struct EntryDeleter {
    void operator()(archive_entry* e) const { archive_entry_free(e); }
};

bool matches(const std::string& rel, const std::vector<std::string>& patterns) {
    for (const auto& raw : patterns) {
        std::string p = raw;
        while (p.size() > 1 && p.back() == '/') {
            p.pop_back();
        }
        if (p == "." || p.empty()) {
            return true;
        }
        if (p.rfind("./", 0) == 0) {
            p = p.substr(2);
        }
        // The file itself, or anything under a matching directory.
        if (fnmatch(p.c_str(), rel.c_str(), FNM_PATHNAME) == 0) {
            return true;
        }
        for (auto pos = rel.find('/'); pos != std::string::npos; pos = rel.find('/', pos + 1)) {
            if (fnmatch(p.c_str(), rel.substr(0, pos).c_str(), FNM_PATHNAME) == 0) {
                return true;
            }
        }
    }
    return false;
}

// libarchive's message for the last failure; it has none for some (a truncated header, a zero-length
// archive), and a null char* must not reach std::string.
std::string library_error(::archive* a) {
    const char* text = archive_error_string(a);
    return text != nullptr ? util::escape_control(text) : "unknown libarchive error";
}

std::string human_bytes(std::int64_t b) {
    const double mib = static_cast<double>(b) / (1024.0 * 1024.0);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f MiB", mib);
    return buf;
}

} // namespace

namespace {

struct Item {
    std::string rel;
    fs::path path;
    fs::path base; // `rel` is read below it, following no link (a job may swap one in meanwhile)
    std::int64_t size;
    bool link;
};

// Every regular file and symlink under `root`, named relative to `base`, filtered by `keep`. A link
// that unpacking would skip (absolute or upward) goes to `skipped` as "path: why" instead.
template <class Keep>
Status collect(const fs::path& root, const fs::path& base, Keep keep, std::vector<Item>& items,
               std::vector<std::string>& skipped) {
    std::error_code ec;
    auto add = [&](const fs::path& p) {
        const auto st = fs::symlink_status(p, ec);
        if (ec) {
            return;
        }
        const bool link = fs::is_symlink(st);
        if (!link && !fs::is_regular_file(st)) {
            return;
        }
        std::string rel = p.lexically_relative(base).generic_string();
        if (!keep(rel)) {
            return;
        }
        std::error_code sec;
        if (link) {
            const std::string target = fs::read_symlink(p, sec).string();
            if (sec || !link_target_stays_inside(target)) {
                skipped.push_back(util::escape_control(rel) + ": link to `" + util::escape_control(target) +
                                  "` left out: only relative links without \"..\" travel");
                return;
            }
        }
        const std::int64_t size = link ? 0 : static_cast<std::int64_t>(fs::file_size(p, sec));
        items.push_back({rel, p, base, sec ? 0 : size, link});
    };
    const auto st = fs::symlink_status(root, ec);
    if (ec || !fs::exists(st)) {
        return {};
    }
    if (!fs::is_directory(st)) {
        add(root);
        return {};
    }
    for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        add(it->path());
    }
    if (ec) {
        return make_error(ErrorCode::io, "cannot list " + root.string() + ": " + ec.message());
    }
    return {};
}

// Headers add about 1.5 KiB per file in pax format.
std::int64_t estimated_archive_bytes(const std::vector<Item>& items) {
    std::int64_t content = 0;
    for (const auto& i : items) {
        content += i.size;
    }
    return content + static_cast<std::int64_t>(items.size()) * 1536 + 2048;
}

// libarchive's write callback for an archive kept in memory (a std::string).
la_ssize_t append_to_string(::archive*, void* client, const void* data, size_t n) {
    static_cast<std::string*>(client)->append(static_cast<const char*>(data), n);
    return static_cast<la_ssize_t>(n);
}

// Where write_archive puts the archive: `memory` when set, else the file `path`.
struct ArchiveTarget {
    fs::path path;
    std::string* memory = nullptr;
    std::string name() const { return memory != nullptr ? std::string("the archive in memory") : path.string(); }
};

// A listed regular file, opened for reading below its base without following any link.
Result<UniqueFd> open_item(const Item& i) {
    // The base is the caller's (the attempt's outputs folder, the folder a researcher named): links
    // in its own path are theirs; below it none is followed.
    const UniqueFd base(::open(i.base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!base) {
        return make_error(ErrorCode::io, "cannot open " + i.base.string() + ": " + std::strerror(errno));
    }
    return util::open_beneath(base.get(), i.path.lexically_relative(i.base), O_RDONLY | O_NONBLOCK);
}

// Writes one listed item to the archive (its header, then a file's bytes through a descriptor), or
// notes in out.skipped why it was left out; an Error only when the archive itself fails.
Status add_item(::archive* w, const Item& i, std::vector<char>& buf, PackedOutputs& out) {
    struct stat st {};
    UniqueFd file;
    if (i.link) {
        if (lstat(i.path.c_str(), &st) != 0) {
            return {}; // vanished since listing
        }
    } else {
        // Through a descriptor opened below the base: a name swapped for a link since it was
        // listed (by a job still running) is left out, never followed.
        auto got = open_item(i);
        if (!got) {
            out.skipped.push_back(util::escape_control(i.rel) + ": " + got.error().message + "; left out");
            return {};
        }
        file = std::move(*got);
        if (::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
            out.skipped.push_back(util::escape_control(i.rel) + ": not a regular file any more; left out");
            return {};
        }
    }
    std::unique_ptr<archive_entry, EntryDeleter> e(archive_entry_new());
    archive_entry_set_pathname(e.get(), i.rel.c_str());
    archive_entry_set_perm(e.get(), st.st_mode & 0755);
    archive_entry_set_mtime(e.get(), st.st_mtime, 0);
    if (i.link) {
        std::error_code lec;
        const auto target = fs::read_symlink(i.path, lec);
        if (lec || !link_target_stays_inside(target.string())) {
            out.skipped.push_back(util::escape_control(i.rel) + ": link changed while packing; left out");
            return {};
        }
        archive_entry_set_filetype(e.get(), AE_IFLNK);
        archive_entry_set_symlink(e.get(), target.c_str());
        archive_entry_set_size(e.get(), 0);
    } else {
        archive_entry_set_filetype(e.get(), AE_IFREG);
        archive_entry_set_size(e.get(), st.st_size);
    }
    if (archive_write_header(w, e.get()) != ARCHIVE_OK) {
        return make_error(ErrorCode::io, "archiving " + i.rel + ": " + library_error(w));
    }
    // At most the size the header announced: a file that grows meanwhile is cut there.
    auto left = i.link ? std::size_t{0} : static_cast<std::size_t>(st.st_size);
    while (left > 0) {
        const ssize_t n = ::read(file.get(), buf.data(), std::min(buf.size(), left));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break; // shrank meanwhile: libarchive pads the entry to its announced size
        }
        left -= static_cast<std::size_t>(n);
        if (archive_write_data(w, buf.data(), static_cast<std::size_t>(n)) < 0) {
            return make_error(ErrorCode::io, "archiving " + i.rel + ": " + library_error(w));
        }
    }
    out.files.push_back(i.rel);
    return {};
}

Result<PackedOutputs> write_archive(std::vector<Item> items, std::vector<std::string> skipped, std::int64_t max_bytes,
                                    const ArchiveTarget& to, const std::string& cap_field) {
    PackedOutputs out;
    out.skipped = std::move(skipped);
    std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.rel < b.rel; });
    for (const auto& i : items) {
        out.content_bytes += i.size;
    }
    const std::int64_t estimate = estimated_archive_bytes(items);
    if (estimate > max_bytes) {
        auto biggest = items;
        std::sort(biggest.begin(), biggest.end(), [](const Item& a, const Item& b) { return a.size > b.size; });
        std::string top;
        for (std::size_t k = 0; k < biggest.size() && k < 3; ++k) {
            top += (k ? ", " : "") + biggest[k].rel + " (" + human_bytes(biggest[k].size) + ")";
        }
        return make_error(ErrorCode::invalid_input,
                          cap_field.substr(0, cap_field.find('.')) + " are " + human_bytes(out.content_bytes) + " in " +
                              std::to_string(items.size()) + " files, over " + cap_field + " " + human_bytes(max_bytes) +
                              "; largest: " + top,
                          cap_field);
    }

    std::unique_ptr<::archive, WriterDeleter> w(archive_write_new());
    archive_write_set_format_pax_restricted(w.get());
    if (to.memory != nullptr) {
        archive_write_set_bytes_in_last_block(w.get(), 1); // no padding to a whole block, as for a file
    }
    const int opened = to.memory != nullptr
                           ? archive_write_open(w.get(), to.memory, nullptr, append_to_string, nullptr)
                           : archive_write_open_filename(w.get(), to.path.c_str());
    if (opened != ARCHIVE_OK) {
        return make_error(ErrorCode::io, "cannot write " + to.name() + ": " + library_error(w.get()));
    }
    std::vector<char> buf(std::size_t{1} << 16);
    for (const auto& i : items) {
        if (auto st = add_item(w.get(), i, buf, out); !st) {
            return st.error();
        }
    }
    if (archive_write_close(w.get()) != ARCHIVE_OK) {
        return make_error(ErrorCode::io, "closing " + to.name() + ": " + library_error(w.get()));
    }
    std::error_code ec;
    const auto final_size = to.memory != nullptr ? static_cast<std::int64_t>(to.memory->size())
                                                 : static_cast<std::int64_t>(fs::file_size(to.path, ec));
    if (!ec && final_size > max_bytes) {
        if (to.memory != nullptr) {
            to.memory->clear();
        } else {
            fs::remove(to.path, ec);
        }
        return make_error(ErrorCode::invalid_input,
                          "the archive is " + human_bytes(final_size) + ", over " + cap_field + " " + human_bytes(max_bytes),
                          cap_field);
    }
    return out;
}

} // namespace

Result<PackedOutputs> pack_outputs(const fs::path& dir, const std::vector<std::string>& patterns, std::int64_t max_bytes,
                                   const fs::path& archive_path) {
    std::vector<Item> items;
    std::vector<std::string> skipped;
    if (auto st = collect(dir, dir, [&](const std::string& rel) { return matches(rel, patterns); }, items, skipped);
        !st) {
        return st.error();
    }
    return write_archive(std::move(items), std::move(skipped), max_bytes, {archive_path}, "outputs.max_size");
}

Result<std::optional<SmallOutputs>> pack_small_outputs(const fs::path& dir, const std::vector<std::string>& patterns,
                                                       std::int64_t max_bytes, std::int64_t small_bytes) {
    std::vector<Item> items;
    std::vector<std::string> skipped;
    if (auto st = collect(dir, dir, [&](const std::string& rel) { return matches(rel, patterns); }, items, skipped);
        !st) {
        return st.error();
    }
    if (estimated_archive_bytes(items) > small_bytes) {
        return std::optional<SmallOutputs>();
    }
    SmallOutputs small;
    auto packed = write_archive(std::move(items), std::move(skipped), max_bytes, {{}, &small.archive}, "outputs.max_size");
    if (!packed) {
        return packed.error();
    }
    small.packed = std::move(*packed);
    return std::optional<SmallOutputs>(std::move(small));
}

Result<PackedOutputs> pack_paths(const std::vector<fs::path>& roots, std::int64_t max_bytes, const fs::path& archive_path) {
    std::vector<Item> items;
    std::vector<std::string> skipped;
    for (const auto& root : roots) {
        const fs::path clean = root.lexically_normal();
        const fs::path base = (clean.has_filename() ? clean : clean.parent_path()).parent_path();
        if (auto st = collect(clean, base, [](const std::string&) { return true; }, items, skipped); !st) {
            return st.error();
        }
    }
    return write_archive(std::move(items), std::move(skipped), max_bytes, {archive_path}, "inputs.max_size");
}

bool link_target_stays_inside(std::string_view target) {
    if (target.empty() || target.front() == '/') {
        return false;
    }
    std::size_t begin = 0;
    while (begin <= target.size()) {
        const std::size_t end = std::min(target.find('/', begin), target.size());
        if (target.substr(begin, end - begin) == "..") {
            return false;
        }
        begin = end + 1;
    }
    return true;
}

namespace {

constexpr std::size_t k_max_entry_name = 4096;
constexpr int k_dir_flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

// An entry's name as it may be shown in a message: control characters escaped, very long names cut.
std::string shown(std::string_view name) {
    constexpr std::size_t k_shown = 120;
    if (name.size() > k_shown) {
        return util::escape_control(name.substr(0, k_shown)) + "… (" + std::to_string(name.size()) + " bytes)";
    }
    return util::escape_control(name);
}

Error refused(std::string_view name, const std::string& why) {
    return make_error(ErrorCode::invalid_input, "refused archive entry `" + shown(name) + "`: " + why);
}

// A failed system call on an entry: what the archive can cause (a link or a file in the way, a name
// too long) is the archive's fault; anything else (no space, no permission) is the machine's.
Error sys_error(std::string_view name, const std::string& what, int err) {
    const std::string why = what + ": " + std::generic_category().message(err);
    if (err == ELOOP || err == ENOTDIR || err == EEXIST || err == EISDIR || err == ENAMETOOLONG) {
        return refused(name, why);
    }
    return make_error(ErrorCode::io, "unpacking archive entry `" + shown(name) + "`: " + why);
}

// Opens the directory made of the first `count` components below `root`, creating the missing ones
// (0755) and following no link: a component that is a link or not a directory refuses the entry.
Result<UniqueFd> open_dirs(int root, const std::vector<std::string>& parts, std::size_t count, std::string_view name) {
    UniqueFd dir(::openat(root, ".", k_dir_flags));
    if (dir.get() < 0) {
        return sys_error(name, "opening the destination", errno);
    }
    std::string walked;
    for (std::size_t i = 0; i < count; ++i) {
        walked += (i ? "/" : "") + parts[i];
        int fd = ::openat(dir.get(), parts[i].c_str(), k_dir_flags);
        if (fd < 0 && errno == ENOENT) {
            if (::mkdirat(dir.get(), parts[i].c_str(), 0755) != 0 && errno != EEXIST) {
                return sys_error(name, "creating directory " + shown(walked), errno);
            }
            fd = ::openat(dir.get(), parts[i].c_str(), k_dir_flags);
        }
        if (fd < 0) {
            if (errno == ELOOP || errno == ENOTDIR) {
                return refused(name, "`" + shown(walked) + "` is a link or not a directory (links are never followed)");
            }
            return sys_error(name, "opening directory " + shown(walked), errno);
        }
        dir = UniqueFd(fd);
    }
    return dir;
}

// Removes what has the entry's name in `dir` so that a file or link can take its place; a directory
// stays (and the entry is refused).
Status clear_name(int dir, const std::string& leaf, std::string_view name) {
    if (::unlinkat(dir, leaf.c_str(), 0) != 0 && errno != ENOENT) {
        if (errno == EISDIR || errno == EPERM) {
            return refused(name, "a directory of that name is already there");
        }
        return sys_error(name, "replacing the old entry", errno);
    }
    return {};
}

Status write_all(int fd, const char* data, std::size_t size, std::string_view name) {
    while (size > 0) {
        const ssize_t n = ::write(fd, data, size);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return sys_error(name, "writing", errno);
        }
        data += n;
        size -= static_cast<std::size_t>(n);
    }
    return {};
}

std::string why_skipped(archive_entry* e) {
    if (const char* target = archive_entry_hardlink(e)) {
        return "hard link to `" + shown(target) + "` not unpacked";
    }
    switch (archive_entry_filetype(e)) {
    case AE_IFLNK:
        return "link to `" + shown(archive_entry_symlink(e) ? archive_entry_symlink(e) : "") +
               "` not unpacked: only relative links without \"..\" are";
    case AE_IFCHR:
        return "character device not unpacked";
    case AE_IFBLK:
        return "block device not unpacked";
    case AE_IFIFO:
        return "fifo not unpacked";
    case AE_IFSOCK:
        return "socket not unpacked";
    default:
        return "entry of unknown type not unpacked";
    }
}

// Reads every entry of the opened archive `r` into `dest`; `default_max_bytes` stands for a negative
// limits.max_bytes.
Result<UnpackReport> unpack_from(::archive* r, const fs::path& dest, const UnpackLimits& limits,
                                 std::int64_t default_max_bytes) {
    std::error_code ec;
    fs::create_directories(dest, ec);
    if (ec) {
        return make_error(ErrorCode::io, "cannot create " + dest.string() + ": " + ec.message());
    }
    const UniqueFd root(::open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (root.get() < 0) {
        return make_error(ErrorCode::io, "cannot open " + dest.string() + ": " + std::generic_category().message(errno));
    }
    const std::int64_t max_bytes = limits.max_bytes < 0 ? default_max_bytes : limits.max_bytes;
    std::int64_t bytes_left = max_bytes;
    std::int64_t entries = 0;
    UnpackReport report;
    std::vector<char> buf(std::size_t{1} << 16);
    archive_entry* e = nullptr;
    for (;;) {
        const int rc = archive_read_next_header(r, &e);
        if (rc == ARCHIVE_EOF) {
            break;
        }
        if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
            return make_error(ErrorCode::invalid_input, "corrupt archive: " + library_error(r));
        }
        if (++entries > limits.max_entries) {
            return make_error(ErrorCode::invalid_input,
                              "the archive holds more than " + std::to_string(limits.max_entries) + " entries");
        }
        const char* raw = archive_entry_pathname(e);
        auto parts = entry_name_parts(raw);
        if (!parts) {
            return parts.error();
        }
        const std::string name = util::join(*parts, "/");
        const auto type = archive_entry_filetype(e);
        const bool hard_link = archive_entry_hardlink(e) != nullptr;
        const char* link_target = archive_entry_symlink(e);
        if (parts->empty()) {
            if (type == AE_IFDIR && !hard_link) {
                continue; // "./": the destination itself
            }
            return refused(raw, "the name is the destination directory itself");
        }
        if (hard_link || (type != AE_IFDIR && type != AE_IFREG && type != AE_IFLNK) ||
            (type == AE_IFLNK && !link_target_stays_inside(link_target ? link_target : ""))) {
            report.skipped.push_back(shown(name) + ": " + why_skipped(e));
            continue;
        }
        const std::size_t parents = type == AE_IFDIR ? parts->size() : parts->size() - 1;
        auto dir = open_dirs(root.get(), *parts, parents, name);
        if (!dir) {
            return dir.error();
        }
        if (type == AE_IFDIR) {
            continue;
        }
        const std::string& leaf = parts->back();
        if (auto cleared = clear_name(dir->get(), leaf, name); !cleared) {
            return cleared.error();
        }
        if (type == AE_IFLNK) {
            if (::symlinkat(link_target, dir->get(), leaf.c_str()) != 0) {
                return sys_error(name, "creating the link", errno);
            }
            report.written.push_back(name);
            continue;
        }
        if (archive_entry_size_is_set(e) && archive_entry_size(e) > bytes_left) {
            return refused(name, "it holds " + std::to_string(archive_entry_size(e)) + " bytes, over the " +
                                     std::to_string(max_bytes) + " bytes this archive may write in all");
        }
        const UniqueFd out(::openat(dir->get(), leaf.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
        if (out.get() < 0) {
            return sys_error(name, "creating the file", errno);
        }
        for (;;) {
            const la_ssize_t n = archive_read_data(r, buf.data(), buf.size());
            if (n < 0) {
                return make_error(ErrorCode::invalid_input, "corrupt archive: " + library_error(r));
            }
            if (n == 0) {
                break;
            }
            bytes_left -= n;
            if (bytes_left < 0) {
                return refused(name, "the archive writes more than " + std::to_string(max_bytes) + " bytes in all");
            }
            if (auto wrote = write_all(out.get(), buf.data(), static_cast<std::size_t>(n), name); !wrote) {
                return wrote.error();
            }
        }
        const mode_t mode = (archive_entry_perm(e) & 0111) != 0 ? 0755 : 0644;
        if (::fchmod(out.get(), mode) != 0) {
            return sys_error(name, "setting its mode", errno);
        }
        report.written.push_back(name);
    }
    return report;
}

} // namespace

Result<UnpackReport> unpack_archive(std::string_view bytes, const fs::path& dest, const UnpackLimits& limits) {
    std::unique_ptr<::archive, ReaderDeleter> r(archive_read_new());
    archive_read_support_format_tar(r.get());
    archive_read_support_filter_none(r.get());
    if (archive_read_open_memory(r.get(), bytes.data(), bytes.size()) != ARCHIVE_OK) {
        return make_error(ErrorCode::invalid_input, "not a tar archive: " + library_error(r.get()));
    }
    return unpack_from(r.get(), dest, limits, static_cast<std::int64_t>(bytes.size()));
}

Result<UnpackReport> unpack_archive_file(const fs::path& archive_path, const fs::path& dest, const UnpackLimits& limits) {
    std::error_code ec;
    const auto size = fs::file_size(archive_path, ec);
    if (ec) {
        return make_error(ErrorCode::io, "cannot read " + archive_path.string() + ": " + ec.message());
    }
    std::unique_ptr<::archive, ReaderDeleter> r(archive_read_new());
    archive_read_support_format_tar(r.get());
    archive_read_support_filter_none(r.get());
    if (archive_read_open_filename(r.get(), archive_path.c_str(), std::size_t{1} << 16) != ARCHIVE_OK) {
        return make_error(ErrorCode::invalid_input,
                          "not a tar archive: " + archive_path.string() + ": " + library_error(r.get()));
    }
    return unpack_from(r.get(), dest, limits, static_cast<std::int64_t>(size));
}

Result<std::vector<std::string>> entry_name_parts(const char* raw) {
    if (raw == nullptr || *raw == '\0') {
        return make_error(ErrorCode::invalid_input, "refused an archive entry without a name");
    }
    const std::string_view name(raw);
    if (name.size() > k_max_entry_name) {
        return refused(name, "the name is longer than " + std::to_string(k_max_entry_name) + " bytes");
    }
    if (name.front() == '/') {
        return refused(name, "absolute paths are not allowed");
    }
    std::vector<std::string> parts;
    std::size_t begin = 0;
    while (begin <= name.size()) {
        const std::size_t end = std::min(name.find('/', begin), name.size());
        const std::string_view part = name.substr(begin, end - begin);
        begin = end + 1;
        if (part.empty() || part == ".") {
            continue;
        }
        if (part == "..") {
            return refused(name, "\"..\" components are not allowed");
        }
        if (part.size() > NAME_MAX) {
            return refused(name, "a component is longer than " + std::to_string(NAME_MAX) + " bytes");
        }
        parts.emplace_back(part);
    }
    return parts;
}

} // namespace gpupool::archive

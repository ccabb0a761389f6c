#include "worker/agent/archive.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <memory>

namespace gpupool::worker {

namespace fs = std::filesystem;

namespace {

struct WriterDeleter {
    void operator()(archive* a) const { archive_write_free(a); }
};
struct ReaderDeleter {
    void operator()(archive* a) const { archive_read_free(a); }
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
    std::int64_t size;
    bool link;
};

// Every regular file and symlink under `root`, named relative to `base`, filtered by `keep`.
template <class Keep>
Status collect(const fs::path& root, const fs::path& base, Keep keep, std::vector<Item>& items) {
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
        const std::int64_t size = link ? 0 : static_cast<std::int64_t>(fs::file_size(p, sec));
        items.push_back({rel, p, sec ? 0 : size, link});
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

Result<PackedOutputs> write_archive(std::vector<Item> items, std::int64_t max_bytes, const fs::path& archive_path,
                                    const std::string& cap_field) {
    PackedOutputs out;
    std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.rel < b.rel; });
    for (const auto& i : items) {
        out.content_bytes += i.size;
    }
    // Headers add about 1.5 KiB per file in pax format.
    const std::int64_t estimate = out.content_bytes + static_cast<std::int64_t>(items.size()) * 1536 + 2048;
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

    std::unique_ptr<archive, WriterDeleter> w(archive_write_new());
    archive_write_set_format_pax_restricted(w.get());
    if (archive_write_open_filename(w.get(), archive_path.c_str()) != ARCHIVE_OK) {
        return make_error(ErrorCode::io, "cannot write " + archive_path.string() + ": " + archive_error_string(w.get()));
    }
    std::vector<char> buf(std::size_t{1} << 16);
    for (const auto& i : items) {
        struct stat st {};
        if (lstat(i.path.c_str(), &st) != 0) {
            continue; // vanished since listing
        }
        std::unique_ptr<archive_entry, EntryDeleter> e(archive_entry_new());
        archive_entry_set_pathname(e.get(), i.rel.c_str());
        archive_entry_set_perm(e.get(), st.st_mode & 0755);
        archive_entry_set_mtime(e.get(), st.st_mtime, 0);
        if (i.link) {
            std::error_code lec;
            const auto target = fs::read_symlink(i.path, lec);
            archive_entry_set_filetype(e.get(), AE_IFLNK);
            archive_entry_set_symlink(e.get(), target.c_str());
            archive_entry_set_size(e.get(), 0);
        } else {
            archive_entry_set_filetype(e.get(), AE_IFREG);
            archive_entry_set_size(e.get(), st.st_size);
        }
        if (archive_write_header(w.get(), e.get()) != ARCHIVE_OK) {
            return make_error(ErrorCode::io, "archiving " + i.rel + ": " + archive_error_string(w.get()));
        }
        if (!i.link) {
            std::ifstream in(i.path, std::ios::binary);
            while (in) {
                in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
                const auto n = in.gcount();
                if (n > 0 && archive_write_data(w.get(), buf.data(), static_cast<std::size_t>(n)) < 0) {
                    return make_error(ErrorCode::io, "archiving " + i.rel + ": " + archive_error_string(w.get()));
                }
            }
        }
        out.files.push_back(i.rel);
    }
    if (archive_write_close(w.get()) != ARCHIVE_OK) {
        return make_error(ErrorCode::io, "closing " + archive_path.string() + ": " + archive_error_string(w.get()));
    }
    std::error_code ec;
    const auto final_size = static_cast<std::int64_t>(fs::file_size(archive_path, ec));
    if (!ec && final_size > max_bytes) {
        fs::remove(archive_path, ec);
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
    if (auto st = collect(dir, dir, [&](const std::string& rel) { return matches(rel, patterns); }, items); !st) {
        return st.error();
    }
    return write_archive(std::move(items), max_bytes, archive_path, "outputs.max_size");
}

Result<PackedOutputs> pack_paths(const std::vector<fs::path>& roots, std::int64_t max_bytes, const fs::path& archive_path) {
    std::vector<Item> items;
    for (const auto& root : roots) {
        const fs::path clean = root.lexically_normal();
        const fs::path base = (clean.has_filename() ? clean : clean.parent_path()).parent_path();
        if (auto st = collect(clean, base, [](const std::string&) { return true; }, items); !st) {
            return st.error();
        }
    }
    return write_archive(std::move(items), max_bytes, archive_path, "inputs.max_size");
}

Result<std::vector<std::string>> unpack_archive(const std::string& bytes, const fs::path& dest) {
    std::vector<std::string> written;
    std::unique_ptr<archive, ReaderDeleter> r(archive_read_new());
    archive_read_support_format_tar(r.get());
    archive_read_support_filter_none(r.get());
    if (archive_read_open_memory(r.get(), bytes.data(), bytes.size()) != ARCHIVE_OK) {
        return make_error(ErrorCode::invalid_input, std::string("not a tar archive: ") + archive_error_string(r.get()));
    }
    std::error_code ec;
    fs::create_directories(dest, ec);
    if (ec) {
        return make_error(ErrorCode::io, "cannot create " + dest.string() + ": " + ec.message());
    }
    archive_entry* e = nullptr;
    std::vector<char> buf(std::size_t{1} << 16);
    for (;;) {
        const int rc = archive_read_next_header(r.get(), &e);
        if (rc == ARCHIVE_EOF) {
            break;
        }
        if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
            return make_error(ErrorCode::invalid_input, std::string("corrupt archive: ") + archive_error_string(r.get()));
        }
        const fs::path rel = fs::path(archive_entry_pathname(e)).lexically_normal();
        const std::string rel_s = rel.generic_string();
        if (rel.is_absolute() || rel_s.empty() || rel_s.rfind("..", 0) == 0) {
            return make_error(ErrorCode::invalid_input, "archive entry escapes the output directory: " + rel_s);
        }
        const fs::path target = dest / rel;
        fs::create_directories(target.parent_path(), ec);
        const auto type = archive_entry_filetype(e);
        if (type == AE_IFDIR) {
            fs::create_directories(target, ec);
            continue;
        }
        fs::remove(target, ec);
        if (type == AE_IFLNK) {
            const fs::path link = archive_entry_symlink(e) ? fs::path(archive_entry_symlink(e)) : fs::path();
            const auto resolved = (target.parent_path() / link).lexically_normal();
            const auto root = dest.lexically_normal();
            if (link.is_absolute() || resolved.generic_string().rfind(root.generic_string(), 0) != 0) {
                continue; // a link pointing outside is dropped, not followed
            }
            fs::create_symlink(link, target, ec);
            written.push_back(rel_s);
            continue;
        }
        if (type != AE_IFREG) {
            continue;
        }
        std::ofstream out(target, std::ios::binary | std::ios::trunc);
        if (!out) {
            return make_error(ErrorCode::io, "cannot write " + target.string());
        }
        for (;;) {
            const auto n = archive_read_data(r.get(), buf.data(), buf.size());
            if (n < 0) {
                return make_error(ErrorCode::invalid_input, std::string("corrupt archive: ") + archive_error_string(r.get()));
            }
            if (n == 0) {
                break;
            }
            out.write(buf.data(), static_cast<std::streamsize>(n));
        }
        fs::permissions(target, static_cast<fs::perms>((archive_entry_perm(e) & 0755) | 0600), ec);
        written.push_back(rel_s);
    }
    return written;
}

} // namespace gpupool::worker

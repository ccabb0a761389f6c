#include "core/archive/listing.hpp"

#include "core/archive/archive.hpp"
#include "core/util/sha256.hpp"
#include "core/util/tree_fd.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <archive.h>
#include <archive_entry.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <unistd.h>

namespace gpupool::archive {

namespace {

struct ListingReaderDeleter {
    void operator()(::archive* a) const { archive_read_free(a); }
};

std::string listing_library_error(::archive* a) {
    const char* s = archive_error_string(a);
    return s != nullptr ? s : "unknown libarchive error";
}

// The entry's name as unpack_archive would write it ("a/./b//c" is "a/b/c"), or why it would refuse it.
Result<std::string> listed_name(const char* raw) {
    auto parts = entry_name_parts(raw);
    if (!parts) {
        return parts.error();
    }
    if (parts->empty()) {
        return make_error(ErrorCode::invalid_input, "an archive entry's name has no component");
    }
    std::string out;
    for (const auto& p : *parts) {
        out += (out.empty() ? "" : "/") + p;
    }
    return out;
}

// Reads the current entry's data, hashing it; the bytes read.
Result<std::int64_t> hash_entry(::archive* r, util::Sha256& sha) {
    std::int64_t total = 0;
    std::string buf(std::size_t{1} << 16, '\0');
    for (;;) {
        const la_ssize_t n = archive_read_data(r, buf.data(), buf.size());
        if (n < 0) {
            return make_error(ErrorCode::invalid_input, "cannot read an entry: " + listing_library_error(r));
        }
        if (n == 0) {
            return total;
        }
        sha.update(std::string_view(buf.data(), static_cast<std::size_t>(n)));
        total += n;
    }
}

// The archive's bytes as libarchive asks for them, read from `fd` in order, each also fed to `whole`
// when there is one: every byte libarchive reads (it reads past entries it skips, having no seek).
struct HashingSource {
    int fd = -1;
    util::Sha256* whole = nullptr;
    std::string buf = std::string(std::size_t{1} << 16, '\0');
    int error = 0; // errno of a failed read

    // Reads the next piece; 0 at the end, -1 (error set) when reading fails.
    la_ssize_t next() {
        for (;;) {
            const ssize_t n = ::read(fd, buf.data(), buf.size());
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n < 0) {
                error = errno;
                return -1;
            }
            if (whole != nullptr) {
                whole->update(std::string_view(buf.data(), static_cast<std::size_t>(n)));
            }
            return n;
        }
    }
    static la_ssize_t read(::archive*, void* self, const void** out) {
        auto* s = static_cast<HashingSource*>(self);
        *out = s->buf.data();
        return s->next();
    }
};

// The entries of the archive `src` reads, in archive order (dedup and digest: list_archive_file).
Result<std::vector<ListedEntry>> read_entries(HashingSource& src, const ListLimits& limits) {
    std::unique_ptr<::archive, ListingReaderDeleter> r(archive_read_new());
    archive_read_support_format_tar(r.get());
    archive_read_support_filter_none(r.get());
    if (archive_read_open(r.get(), &src, nullptr, &HashingSource::read, nullptr) != ARCHIVE_OK) {
        return make_error(ErrorCode::invalid_input, "not a tar archive: " + listing_library_error(r.get()));
    }
    std::vector<ListedEntry> all;
    archive_entry* e = nullptr;
    for (;;) {
        const int rc = archive_read_next_header(r.get(), &e);
        if (rc == ARCHIVE_EOF) {
            break;
        }
        if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
            return make_error(ErrorCode::invalid_input, "a damaged archive: " + listing_library_error(r.get()));
        }
        if (static_cast<std::int64_t>(all.size()) >= limits.max_entries) {
            return make_error(ErrorCode::invalid_input,
                              "more than " + std::to_string(limits.max_entries) + " entries in the archive");
        }
        auto name = listed_name(archive_entry_pathname(e));
        if (!name) {
            return name.error();
        }
        ListedEntry item;
        item.path = std::move(*name);
        const auto type = archive_entry_filetype(e);
        if (type == AE_IFDIR) {
            continue;
        }
        if (archive_entry_hardlink(e) != nullptr) {
            item.type = "other";
        } else if (type == AE_IFREG) {
            item.type = "file";
            util::Sha256 sha;
            auto bytes = hash_entry(r.get(), sha);
            if (!bytes) {
                return bytes.error();
            }
            item.size = *bytes;
            item.sha256 = sha.hex();
        } else if (type == AE_IFLNK) {
            item.type = "link";
            const char* target = archive_entry_symlink(e);
            item.target = target != nullptr ? target : "";
        } else {
            item.type = "other";
        }
        all.push_back(std::move(item));
    }
    return all;
}

} // namespace

Result<Listing> list_archive_file(const std::filesystem::path& archive_path, const ListLimits& limits,
                                  util::Sha256* whole) {
    util::UniqueFd fd(::open(archive_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
        return make_error(ErrorCode::io, "cannot read " + archive_path.string() + ": " + std::strerror(errno));
    }
    HashingSource src{fd.get(), whole};
    auto entries = read_entries(src, limits);
    // The rest of the file (past the archive's end, or past where a refused one stopped) for `whole`.
    while (whole != nullptr && src.error == 0 && src.next() > 0) {
    }
    if (src.error != 0) {
        return make_error(ErrorCode::io, "cannot read " + archive_path.string() + ": " + std::strerror(src.error));
    }
    if (!entries) {
        return entries.error();
    }
    std::vector<ListedEntry>& all = *entries;
    Listing out;
    // A name written twice is unpacked twice, the last copy winning: list that one.
    std::stable_sort(all.begin(), all.end(), [](const ListedEntry& a, const ListedEntry& b) { return a.path < b.path; });
    std::vector<ListedEntry> unique;
    for (auto& item : all) {
        if (!unique.empty() && unique.back().path == item.path) {
            unique.back() = std::move(item);
        } else {
            unique.push_back(std::move(item));
        }
    }
    util::Sha256 tree;
    for (const auto& item : unique) {
        tree.update(item.path);
        tree.update(std::string_view("\0", 1));
        tree.update(item.type);
        tree.update(std::string_view("\0", 1));
        tree.update(item.type == "link" ? item.target : item.sha256);
        tree.update("\n");
    }
    out.tree_sha256 = tree.hex();
    out.entry_count = static_cast<std::int64_t>(unique.size());
    for (const auto& item : unique) {
        out.file_bytes += item.size;
    }
    if (unique.size() > limits.max_listed) {
        unique.resize(limits.max_listed);
    }
    out.entries = std::move(unique);
    return out;
}

nlohmann::json to_json(const Listing& listing) {
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& e : listing.entries) {
        nlohmann::json j{{"path", e.path}, {"type", e.type}};
        if (e.type == "file") {
            j["size"] = e.size;
            j["sha256"] = e.sha256;
        } else if (e.type == "link") {
            j["target"] = e.target;
        }
        entries.push_back(std::move(j));
    }
    return {{"entry_count", listing.entry_count},
            {"file_bytes", listing.file_bytes},
            {"tree_sha256", listing.tree_sha256},
            {"truncated", listing.truncated()},
            {"entries", std::move(entries)}};
}

} // namespace gpupool::archive

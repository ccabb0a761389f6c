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
#include <iterator>
#include <memory>
#include <optional>
#include <string_view>
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

// An entry's text kept while it is hashed: at most `max` bytes; `whole` false once it has more.
struct KeptText {
    std::int64_t max = 0;
    std::string bytes;
    bool whole = true;
};

// Reads the current entry's data, hashing it (and keeping it in `text` when given); the bytes read.
Result<std::int64_t> hash_entry(::archive* r, util::Sha256& sha, KeptText* text = nullptr) {
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
        const std::string_view piece(buf.data(), static_cast<std::size_t>(n));
        sha.update(piece);
        total += n;
        if (text != nullptr && text->whole) {
            if (total <= text->max) {
                text->bytes += piece;
            } else {
                text->whole = false;
                std::string().swap(text->bytes);
            }
        }
    }
}

// Whether `s` is UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF).
bool utf8_text(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        const auto lead = static_cast<unsigned char>(s[i]);
        if (lead < 0x80) {
            ++i;
            continue;
        }
        std::size_t len = 0;
        unsigned lo = 0x80;
        unsigned hi = 0xBF;
        if (lead >= 0xC2 && lead <= 0xDF) {
            len = 2;
        } else if (lead >= 0xE0 && lead <= 0xEF) {
            len = 3;
            lo = lead == 0xE0 ? 0xA0 : 0x80;
            hi = lead == 0xED ? 0x9F : 0xBF;
        } else if (lead >= 0xF0 && lead <= 0xF4) {
            len = 4;
            lo = lead == 0xF0 ? 0x90 : 0x80;
            hi = lead == 0xF4 ? 0x8F : 0xBF;
        } else {
            return false;
        }
        if (i + len > s.size()) {
            return false;
        }
        for (std::size_t k = 1; k < len; ++k) {
            const unsigned c = static_cast<unsigned char>(s[i + k]);
            if (c < (k == 1 ? lo : 0x80u) || c > (k == 1 ? hi : 0xBFu)) {
                return false;
            }
        }
        i += len;
    }
    return true;
}

// The `*.json` files kept whole for spot checks (ListLimits::json_file_bytes, json_total_bytes), read
// in the pass that hashes them. Which are kept does not depend on the archive's order: the candidates
// (regular files named "*.json" of at most json_file_bytes) are taken in path order while their sizes
// fit json_total_bytes; from the first that does not fit on, none is kept. That rule can be kept
// while reading in any order with memory bounded by the limits: the kept texts' sizes only grow
// along path order, so a newcomer that overflows the total evicts from the largest path down, and the
// smallest path evicted (`m_cut`) bounds every later candidate. A name written twice drops the
// earlier copy's text (unpacking keeps the last copy); it leaves the cut where it was, so an archive
// with such names may keep fewer texts than the rule allows, never a text unpacking would not leave.
// A text that is not UTF-8 is not JSON, and the evidence that stores it would replace its bad bytes
// (two different texts stored alike): it is not kept, so it is compared by its SHA-256.
class JsonCapture {
public:
    explicit JsonCapture(const ListLimits& limits)
        : m_file_bytes(limits.json_file_bytes), m_total_bytes(limits.json_total_bytes) {}

    bool enabled() const { return m_file_bytes > 0 && m_total_bytes > 0; }

    // Whether the regular file `path` of `size` bytes (its header's word) may be kept.
    bool wants(const std::string& path, std::int64_t size) const {
        return enabled() && is_json(path) && size <= m_file_bytes && (!m_cut || path < *m_cut);
    }

    // The text of the copy `path` names, read before, is no longer what unpacking leaves.
    void forget(const std::string& path) {
        if (const auto it = m_kept.find(path); it != m_kept.end()) {
            m_total -= static_cast<std::int64_t>(it->second.size());
            m_kept.erase(it);
        }
    }

    void keep(const std::string& path, std::string text) {
        if (!wants(path, static_cast<std::int64_t>(text.size())) || !utf8_text(text)) {
            return;
        }
        m_total += static_cast<std::int64_t>(text.size());
        m_kept.emplace(path, std::move(text));
        while (m_total > m_total_bytes) {
            auto last = std::prev(m_kept.end());
            m_total -= static_cast<std::int64_t>(last->second.size());
            m_cut = last->first;
            m_kept.erase(last);
        }
    }

    std::map<std::string, std::string> take() { return std::move(m_kept); }

    static bool is_json(const std::string& path) {
        static constexpr std::string_view k_suffix = ".json";
        return path.size() >= k_suffix.size() &&
               path.compare(path.size() - k_suffix.size(), k_suffix.size(), k_suffix) == 0;
    }

private:
    std::int64_t m_file_bytes = 0;
    std::int64_t m_total_bytes = 0;
    std::map<std::string, std::string> m_kept;
    std::int64_t m_total = 0;
    std::optional<std::string> m_cut; // the smallest path a text was refused or evicted for the total
};

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
// Keeps the `*.json` texts in `json` as it reads them.
Result<std::vector<ListedEntry>> read_entries(HashingSource& src, const ListLimits& limits, JsonCapture& json) {
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
        json.forget(item.path);
        if (archive_entry_hardlink(e) != nullptr) {
            item.type = "other";
        } else if (type == AE_IFREG) {
            item.type = "file";
            util::Sha256 sha;
            KeptText text;
            text.max = limits.json_file_bytes;
            const bool keep = json.wants(item.path, archive_entry_size(e));
            auto bytes = hash_entry(r.get(), sha, keep ? &text : nullptr);
            if (!bytes) {
                return bytes.error();
            }
            item.size = *bytes;
            item.sha256 = sha.hex();
            if (keep && text.whole) {
                json.keep(item.path, std::move(text.bytes));
            }
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
    JsonCapture json(limits);
    auto entries = read_entries(src, limits, json);
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
    if (json.enabled()) {
        out.json_texts = json.take();
        // Every regular `*.json` file whose text was not kept, in path order (`unique` is sorted).
        for (const auto& item : unique) {
            if (item.type == "file" && JsonCapture::is_json(item.path) && out.json_texts.count(item.path) == 0) {
                out.json_skipped.push_back(item.path);
            }
        }
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

// Hand-made tar archives for tests that feed the unpacker what a hostile peer could send: entries
// are written one by one with libarchive's own writer (pax format), so names, link targets, types,
// modes and sparse maps are exactly what the test says, whatever the local file system holds.
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace gpupool::test {

struct TarEntry {
    std::string name;
    mode_t type = AE_IFREG;
    std::string content;          // a regular file's data
    std::string symlink;          // AE_IFLNK: the link's target
    std::string hardlink;         // non-empty: a hard link to this name
    int perm = 0644;
    std::int64_t sparse_size = 0; // > 0: a sparse file of this size holding `content` at offset 0
};

inline TarEntry tar_file(std::string name, std::string content, int perm = 0644) {
    return {std::move(name), AE_IFREG, std::move(content), {}, {}, perm, 0};
}
inline TarEntry tar_dir(std::string name) { return {std::move(name), AE_IFDIR, {}, {}, {}, 0755, 0}; }
inline TarEntry tar_symlink(std::string name, std::string target) {
    return {std::move(name), AE_IFLNK, {}, std::move(target), {}, 0777, 0};
}
inline TarEntry tar_hardlink(std::string name, std::string target) {
    return {std::move(name), AE_IFREG, {}, {}, std::move(target), 0644, 0};
}
inline TarEntry tar_special(std::string name, mode_t type) { return {std::move(name), type, {}, {}, {}, 0644, 0}; }

// The archive's bytes; a writer failure fails the test.
inline std::string make_tar(const std::vector<TarEntry>& entries) {
    std::string out;
    ::archive* a = archive_write_new();
    archive_write_set_format_pax(a);
    archive_write_set_bytes_in_last_block(a, 1);
    auto append = [](::archive*, void* sink, const void* data, std::size_t size) -> la_ssize_t {
        static_cast<std::string*>(sink)->append(static_cast<const char*>(data), size);
        return static_cast<la_ssize_t>(size);
    };
    REQUIRE(archive_write_open(a, &out, nullptr, append, nullptr) == ARCHIVE_OK);
    for (const auto& t : entries) {
        archive_entry* e = archive_entry_new();
        archive_entry_set_pathname(e, t.name.c_str());
        archive_entry_set_filetype(e, t.type);
        archive_entry_set_perm(e, static_cast<mode_t>(t.perm));
        archive_entry_set_mtime(e, 1'700'000'000, 0);
        if (!t.symlink.empty()) {
            archive_entry_set_symlink(e, t.symlink.c_str());
        }
        if (!t.hardlink.empty()) {
            archive_entry_set_hardlink(e, t.hardlink.c_str());
        }
        if (t.type == AE_IFCHR || t.type == AE_IFBLK) {
            archive_entry_set_rdevmajor(e, 1);
            archive_entry_set_rdevminor(e, 3);
        }
        const bool data = t.type == AE_IFREG && t.hardlink.empty();
        if (t.sparse_size > 0) {
            archive_entry_set_size(e, t.sparse_size);
            archive_entry_sparse_add_entry(e, 0, static_cast<la_int64_t>(t.content.size()));
        } else {
            archive_entry_set_size(e, data ? static_cast<la_int64_t>(t.content.size()) : 0);
        }
        const int rc = archive_write_header(a, e);
        INFO("writing " << t.name << ": " << (archive_error_string(a) ? archive_error_string(a) : ""));
        REQUIRE(rc == ARCHIVE_OK);
        if (data && !t.content.empty()) {
            REQUIRE(archive_write_data(a, t.content.data(), t.content.size()) ==
                    static_cast<la_ssize_t>(t.content.size()));
        }
        archive_entry_free(e);
    }
    REQUIRE(archive_write_close(a) == ARCHIVE_OK);
    archive_write_free(a);
    return out;
}

} // namespace gpupool::test

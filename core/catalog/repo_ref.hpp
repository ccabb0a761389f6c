// Recipe repositories as a fellow names them: `URL`, `PATH`, or either with `@REV` to pin a revision
// and `#FOLDER` to read the recipes from a folder inside it (`URL@v2#recipes`).
//
// A RepoRef is checked before anything runs git with it: it never starts with `-` (so git cannot
// read it as an option), holds no control characters or spaces, and is at most 2048 bytes. A
// revision is a tag, a branch without `/`, or a commit id: letters, digits, `.`, `_` and `-`, not
// starting with `-` or `.`, at most 128 bytes. The split is at the last `@` whose right side is such
// a revision and whose left side holds a `/` (every URL and path does), so `git@host:org/r.git` and
// `https://user@host/r` are read as locations without a revision. The folder is split off first,
// at the last `#`: a relative path of names (letters, digits, `.`, `_`, `-`, none starting with
// `.`, so no `..`), at most 256 bytes. Pure functions, thread-safe.
#pragma once

#include "core/util/result.hpp"

#include <string>
#include <string_view>

namespace gpupool::catalog {

struct RepoRef {
    std::string location; // a URL (https://, ssh://, file://, git@host:…) or a local path
    std::string revision; // pinned; empty = the repository's default branch, as `update` left it
    std::string subdir{}; // the folder the recipes are in; empty = the top level, or `recipes/` when
                          // the top level has none (Catalog::open)

    // As written: location[@revision][#subdir].
    std::string text() const;
    // The repository as its recipes' origins name it: location[#subdir] (the revision is the commit).
    std::string origin_repo() const;
    bool operator==(const RepoRef&) const = default;
};

// `field` names where the text came from in errors (`recipes[1]` in the config, `--repo`).
Result<RepoRef> parse_repo_ref(std::string_view text, const std::string& field);

// The name of the repository's clone in the cache directory: a readable tail of the location and
// a digest of location[@revision], so two references never share a clone unless they differ only in
// the folder read (the same checkout serves both).
std::string clone_dir_name(const RepoRef& ref);

} // namespace gpupool::catalog

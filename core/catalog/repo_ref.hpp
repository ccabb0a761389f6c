// Recipe repositories as a fellow names them: `URL`, `PATH`, or either with `@REV` to pin a revision.
//
// A RepoRef is checked before anything runs git with it: it never starts with `-` (so git cannot
// read it as an option), holds no control characters or spaces, and is at most 2048 bytes. A
// revision is a tag, a branch without `/`, or a commit id: letters, digits, `.`, `_` and `-`, not
// starting with `-` or `.`, at most 128 bytes. The split is at the last `@` whose right side is such
// a revision and whose left side holds a `/` (every URL and path does), so `git@host:org/r.git` and
// `https://user@host/r` are read as locations without a revision. Pure functions, thread-safe.
#pragma once

#include "core/util/result.hpp"

#include <string>
#include <string_view>

namespace gpupool::catalog {

struct RepoRef {
    std::string location; // a URL (https://, ssh://, file://, git@host:…) or a local path
    std::string revision; // pinned; empty = the repository's default branch, as `update` left it

    // As written: location[@revision].
    std::string text() const;
    bool operator==(const RepoRef&) const = default;
};

// `field` names where the text came from in errors (`recipes[1]` in the config, `--repo`).
Result<RepoRef> parse_repo_ref(std::string_view text, const std::string& field);

// The name of the repository's clone in the cache directory: a readable tail of the location and
// a digest of the whole reference, so two references never share a clone.
std::string clone_dir_name(const RepoRef& ref);

} // namespace gpupool::catalog

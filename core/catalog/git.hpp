// Git: the four things a recipe repository asks of git, behind a small interface so that the
// catalog's failure paths (an update that cannot reach the server) are tested with a fake, while
// the real one is `git` run as a child process (the choice over linking libgit2).
//
// GitCommand runs `git` found on PATH with no terminal prompt (GIT_TERMINAL_PROMPT=0: a private
// repository without credentials fails instead of waiting for a password), `--` before every
// location so that none is read as an option, and `protocol.ext.allow=never` on top of git's own
// default. A non-zero exit is an Error (ErrorCode::io, or not_found when git is missing) that
// quotes git's last words. Not thread-safe; one catalog uses one at a time.
#pragma once

#include "core/util/result.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace gpupool::catalog {

class Git {
public:
    virtual ~Git() = default;
    // A full clone of `location` into `dir` (which must not exist).
    virtual Status clone(const std::string& location, const std::filesystem::path& dir) = 0;
    // Fetches branches and tags from the clone's origin.
    virtual Status fetch(const std::filesystem::path& dir) = 0;
    // Detaches the work tree at `revision` (a commit, a tag, a local or an origin branch), or at
    // the origin's default branch when `revision` is empty, discarding local changes.
    virtual Status checkout(const std::filesystem::path& dir, const std::string& revision) = 0;
    // The commit checked out: 40 (or 64) lowercase hex digits.
    virtual Result<std::string> head(const std::filesystem::path& dir) = 0;
};

class GitCommand final : public Git {
public:
    explicit GitCommand(std::string program = "git");
    Status clone(const std::string& location, const std::filesystem::path& dir) override;
    Status fetch(const std::filesystem::path& dir) override;
    Status checkout(const std::filesystem::path& dir, const std::string& revision) override;
    Result<std::string> head(const std::filesystem::path& dir) override;

private:
    // git's stdout on success.
    Result<std::string> run(const std::vector<std::string>& args);
    std::string m_program;
};

} // namespace gpupool::catalog

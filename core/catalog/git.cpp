#include "core/catalog/git.hpp"

#include "core/util/strings.hpp"

#include <boost/process.hpp>

#include <istream>
#include <iterator>
#include <thread>

namespace gpupool::catalog {

namespace bp = boost::process;
namespace fs = std::filesystem;

namespace {

std::string trimmed(std::string_view s) {
    const auto first = s.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) {
        return {};
    }
    return std::string(s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1));
}

} // namespace

GitCommand::GitCommand(std::string program) : m_program(std::move(program)) {}

Result<std::string> GitCommand::run(const std::vector<std::string>& args) {
    std::vector<std::string> full{"-c", "protocol.ext.allow=never", "-c", "advice.detachedHead=false"};
    full.insert(full.end(), args.begin(), args.end());
    const std::string shown = "git " + util::join(args, " ");
    try {
        const auto exe =
            m_program.find('/') == std::string::npos ? bp::search_path(m_program) : bp::filesystem::path(m_program);
        if (exe.empty()) {
            return make_error(ErrorCode::not_found, "`" + m_program + "` is not on PATH; recipe repositories need git");
        }
        auto env = boost::this_process::environment();
        env["GIT_TERMINAL_PROMPT"] = "0";
        bp::ipstream out;
        bp::ipstream err;
        bp::child c(bp::exe = exe.string(), bp::args = full, bp::std_in<bp::null, bp::std_out> out, bp::std_err > err,
                    env);
        // Both pipes are read at once so that neither fills up and blocks git.
        std::string err_text;
        std::thread err_reader([&] { err_text.assign(std::istreambuf_iterator<char>(err), {}); });
        std::string out_text(std::istreambuf_iterator<char>(out), {});
        err_reader.join();
        c.wait();
        if (c.exit_code() != 0) {
            std::string why = trimmed(err_text);
            if (auto nl = why.rfind('\n'); nl != std::string::npos) {
                why = why.substr(nl + 1);
            }
            return make_error(ErrorCode::io, "`" + shown + "` failed (exit " + std::to_string(c.exit_code()) + ")" +
                                                 (why.empty() ? "" : ": " + util::escape_control(why)));
        }
        return out_text;
    } catch (const std::exception& e) {
        return make_error(ErrorCode::io, "cannot run `" + shown + "`: " + e.what());
    }
}

Status GitCommand::clone(const std::string& location, const fs::path& dir) {
    auto r = run({"clone", "--quiet", "--no-recurse-submodules", "--", location, dir.string()});
    return r ? Status{} : Status{r.error()};
}

Status GitCommand::fetch(const fs::path& dir) {
    auto r = run({"-C", dir.string(), "fetch", "--quiet", "--tags", "--force", "--prune", "origin"});
    return r ? Status{} : Status{r.error()};
}

Status GitCommand::checkout(const fs::path& dir, const std::string& revision) {
    // A pinned branch exists only as origin/NAME in a clone; a tag or a commit resolves as it is.
    std::vector<std::string> candidates;
    if (revision.empty()) {
        candidates = {"origin/HEAD"};
    } else {
        candidates = {"origin/" + revision, revision};
    }
    Error last = make_error(ErrorCode::not_found, "no revision");
    for (const auto& c : candidates) {
        auto commit =
            run({"-C", dir.string(), "rev-parse", "--verify", "--quiet", "--end-of-options", c + "^{commit}"});
        if (!commit) {
            last = commit.error();
            continue;
        }
        auto r = run({"-C", dir.string(), "checkout", "--quiet", "--force", "--detach", trimmed(*commit)});
        return r ? Status{} : Status{r.error()};
    }
    if (revision.empty()) {
        return last;
    }
    return make_error(ErrorCode::not_found, "revision `" + revision +
                                                "` is not in the repository (no such commit, "
                                                "tag or branch)");
}

Result<std::string> GitCommand::head(const fs::path& dir) {
    auto r = run({"-C", dir.string(), "rev-parse", "--verify", "HEAD"});
    if (!r) {
        return r.error();
    }
    return trimmed(*r);
}

} // namespace gpupool::catalog

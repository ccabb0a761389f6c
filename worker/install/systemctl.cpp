#include "worker/install/systemctl.hpp"

#include <boost/process.hpp>

namespace gpupool::worker {

namespace bp = boost::process;

SystemctlCommand::SystemctlCommand(std::string program, bool user, std::string sysusers)
    : m_program(std::move(program)), m_user(user), m_sysusers(std::move(sysusers)) {}

std::vector<std::string> SystemctlCommand::argv(const std::vector<std::string>& args) const {
    std::vector<std::string> full{m_program};
    if (m_user) {
        full.emplace_back("--user");
    }
    full.insert(full.end(), args.begin(), args.end());
    return full;
}

Status SystemctlCommand::run(const std::vector<std::string>& args) {
    return run_program(m_program, argv(args));
}

Status SystemctlCommand::run_program(const std::string& program, const std::vector<std::string>& full) {
    std::string shown;
    for (const auto& a : full) {
        shown += (shown.empty() ? "" : " ") + a;
    }
    try {
        const auto exe =
            program.find('/') == std::string::npos ? bp::search_path(program) : bp::filesystem::path(program);
        if (exe.empty()) {
            return make_error(ErrorCode::not_found, "`" + program + "` is not on PATH: is this a systemd machine?");
        }
        const std::vector<std::string> rest(full.begin() + 1, full.end());
        // Its own words (what it links, why it failed) go to our stderr as they come.
        bp::child c(bp::exe = exe.string(), bp::args = rest, bp::std_in < bp::null, bp::std_out > stderr,
                    bp::std_err > stderr);
        c.wait();
        if (c.exit_code() != 0) {
            return make_error(ErrorCode::io, "`" + shown + "` failed (exit " + std::to_string(c.exit_code()) + ")");
        }
    } catch (const std::exception& e) {
        return make_error(ErrorCode::io, "cannot run `" + shown + "`: " + e.what());
    }
    return {};
}

Status SystemctlCommand::daemon_reload() {
    return run({"daemon-reload"});
}

Status SystemctlCommand::enable_start(const std::string& unit) {
    return run({"enable", "--now", unit});
}

Status SystemctlCommand::try_restart(const std::string& unit) {
    return run({"try-restart", unit});
}

Status SystemctlCommand::stop_disable(const std::string& unit) {
    return run({"disable", "--now", unit});
}

Status SystemctlCommand::try_reload(const std::string& unit) {
    return run({"try-reload-or-restart", unit});
}

Status SystemctlCommand::create_system_users(const std::filesystem::path& root, const std::filesystem::path& config) {
    std::vector<std::string> full{m_sysusers};
    if (root != "/") {
        full.push_back("--root=" + root.string());
    }
    full.push_back((root / config.relative_path()).string());
    return run_program(m_sysusers, full);
}

} // namespace gpupool::worker

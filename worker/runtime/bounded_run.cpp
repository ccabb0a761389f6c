#include "worker/runtime/bounded_run.hpp"

#include "core/util/files.hpp"

#include "worker/runtime/child_io.hpp"

#include <boost/process.hpp>
#include <boost/process/extend.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

namespace gpupool::worker {

namespace bp = boost::process;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto k_reap_wait = std::chrono::seconds(2);

Result<UniqueFd> memory_file(const char* name) {
    UniqueFd fd(::memfd_create(name, MFD_CLOEXEC));
    if (fd.get() < 0) {
        return make_error(ErrorCode::io, std::string("memfd_create failed: ") + std::strerror(errno));
    }
    return fd;
}

// The tool's stdin, whole, then back to its start.
bool write_input(int fd, const std::string& bytes) {
    return util::write_all(fd, bytes) && ::lseek(fd, 0, SEEK_SET) == 0;
}


// SIGKILLs the tool's group and reaps the tool, waiting for that at most k_reap_wait: a process stuck
// in the driver (uninterruptible) dies only when it leaves it, and the worker must not wait on it.
void kill_and_reap(bp::child& c, pid_t pid) {
    ::kill(-pid, SIGKILL); // the tool and whatever it started in its group
    ::kill(pid, SIGKILL);
    const auto give_up = Clock::now() + k_reap_wait;
    std::error_code ec;
    while (c.running(ec) && Clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (c.running(ec)) {
        c.detach(); // left to exit when it can (a zombie until the worker exits)
    }
}

} // namespace

Result<BoundedRun> run_bounded(const std::filesystem::path& program, const std::vector<std::string>& args,
                               const BoundedRunOptions& options) {
    auto in = memory_file("gpupool-tool-stdin");
    auto out = memory_file("gpupool-tool-stdout");
    auto err = memory_file("gpupool-tool-stderr");
    if (!in || !out || !err) {
        return make_error(ErrorCode::io, "cannot run " + program.string() + ": memfd_create failed");
    }
    if (!write_input(in->get(), options.input)) {
        return make_error(ErrorCode::io, "cannot run " + program.string() + ": writing its input failed");
    }
    const int in_fd = in->get();
    const int out_fd = out->get();
    const int err_fd = err->get();
    BoundedRun run;
    try {
        bp::environment env = boost::this_process::environment();
        std::vector<std::string> dropped;
        for (const auto& entry : env) {
            const std::string name = entry.get_name();
            if (std::any_of(options.drop_prefixes.begin(), options.drop_prefixes.end(),
                            [&](const std::string& prefix) { return name.rfind(prefix, 0) == 0; })) {
                dropped.push_back(name);
            }
        }
        for (const auto& name : dropped) {
            env.erase(name);
        }
        for (const auto& [key, value] : options.env) {
            env[key] = value;
        }
        bp::child c(
            bp::exe = program.string(), bp::args = args, bp::env = env,
            bp::extend::on_exec_setup = [in_fd, out_fd, err_fd](auto&) {
                ::setpgid(0, 0);
                ::dup2(in_fd, STDIN_FILENO);
                ::dup2(out_fd, STDOUT_FILENO);
                ::dup2(err_fd, STDERR_FILENO);
                child_redirect_output_and_seal(-1);
            });
        const pid_t pid = c.id();
        ::setpgid(pid, pid); // also from here, so the group exists whoever runs first
        const auto deadline = Clock::now() + options.timeout;
        auto pause = std::chrono::milliseconds(1);
        std::error_code ec;
        while (c.running(ec)) {
            if (Clock::now() > deadline) {
                run.timed_out = true;
                kill_and_reap(c, pid);
                break;
            }
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::milliseconds(20));
        }
        if (!run.timed_out) {
            run.exit_code = c.exit_code();
        }
    } catch (const std::exception& e) {
        return make_error(ErrorCode::io, "cannot run " + program.string() + ": " + e.what());
    }
    run.out = util::read_all(out_fd);
    run.err = util::read_all(err_fd);
    return run;
}

} // namespace gpupool::worker

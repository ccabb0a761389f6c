#include "worker/runtime/process_runtime.hpp"

#include "worker/runtime/child_io.hpp"

#include <boost/process.hpp>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <mutex>
#include <signal.h>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <system_error>
#include <thread>
#include <unistd.h>

namespace gpupool::worker {

namespace bp = boost::process;

namespace {

constexpr const char* k_default_path = "/usr/local/bin:/usr/bin:/bin";

// waitpid() that retries on EINTR. Returns the pid, 0 (still running, WNOHANG) or -1.
pid_t wait_for(pid_t pid, int& status, int options) {
    pid_t r = -1;
    do {
        r = ::waitpid(pid, &status, options);
    } while (r < 0 && errno == EINTR);
    return r;
}

std::filesystem::path resolve_program(const std::string& program, const std::string& path_var) {
    if (program.find('/') != std::string::npos) {
        return program;
    }
    std::vector<std::filesystem::path> dirs;
    std::size_t start = 0;
    while (start <= path_var.size()) {
        std::size_t colon = path_var.find(':', start);
        std::string dir = path_var.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
        dirs.emplace_back(dir.empty() ? "." : dir);
        if (colon == std::string::npos) {
            break;
        }
        start = colon + 1;
    }
    return bp::search_path(program, dirs);
}

// Starts `exe` with exactly `argv` and `env` in `workdir`, as the leader of a new session (so of
// its own process group), stdin /dev/null, stdout and stderr on `log_fd`, no other descriptor, an
// empty signal mask and every signal at its default action (a job does not inherit what the worker
// blocks or ignores, SIGPIPE included). posix_spawn, which starts the child without copying the
// worker's page tables (glibc: clone with CLONE_VM | CLONE_VFORK): a fork of the worker, then its
// exec, cost about as much CPU as the job `true` itself (bench/README.md). Returns 0 or an errno,
// the exec's own failure included.
int spawn_session(const std::filesystem::path& exe, const std::vector<std::string>& argv,
                  const std::vector<std::string>& env, const std::filesystem::path& workdir, int log_fd, pid_t& pid) {
    std::vector<char*> argv_c;
    for (const auto& a : argv) {
        argv_c.push_back(const_cast<char*>(a.c_str()));
    }
    argv_c.push_back(nullptr);
    std::vector<char*> env_c;
    for (const auto& e : env) {
        env_c.push_back(const_cast<char*>(e.c_str()));
    }
    env_c.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    if (int rc = ::posix_spawn_file_actions_init(&actions); rc != 0) {
        return rc;
    }
    posix_spawnattr_t attr;
    if (int rc = ::posix_spawnattr_init(&attr); rc != 0) {
        ::posix_spawn_file_actions_destroy(&actions);
        return rc;
    }
    sigset_t none;
    sigset_t all;
    ::sigemptyset(&none);
    ::sigfillset(&all);
    // The log first: a worker started with its standard descriptors closed may hold it as 0.
    int rc = ::posix_spawn_file_actions_adddup2(&actions, log_fd, STDOUT_FILENO);
    rc = rc != 0 ? rc : ::posix_spawn_file_actions_adddup2(&actions, log_fd, STDERR_FILENO);
    rc = rc != 0 ? rc : ::posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    rc = rc != 0 ? rc : ::posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
    rc = rc != 0 ? rc : ::posix_spawn_file_actions_addchdir_np(&actions, workdir.c_str());
    rc = rc != 0 ? rc : ::posix_spawnattr_setsigmask(&attr, &none);
    rc = rc != 0 ? rc : ::posix_spawnattr_setsigdefault(&attr, &all);
    rc = rc != 0 ? rc
                 : ::posix_spawnattr_setflags(
                       &attr, static_cast<short>(POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF));
    if (rc == 0) {
        rc = ::posix_spawn(&pid, exe.c_str(), &actions, &attr, argv_c.data(), env_c.data());
    }
    ::posix_spawnattr_destroy(&attr);
    ::posix_spawn_file_actions_destroy(&actions);
    return rc;
}

} // namespace

int exit_code_from_wait_status(int status) {
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    if (WIFSIGNALED(status)) {
        return 128 + WTERMSIG(status);
    }
    return 255;
}

std::optional<ProcStat> parse_proc_stat(const std::string& text) {
    // "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses, so fields are
    // counted from the last ')'.
    const auto close = text.rfind(')');
    if (close == std::string::npos) {
        return std::nullopt;
    }
    std::istringstream rest(text.substr(close + 1));
    std::vector<std::string> fields; // fields[0] is field 3 (state)
    for (std::string f; rest >> f && fields.size() < 20;) {
        fields.push_back(f);
    }
    if (fields.size() < 20) {
        return std::nullopt;
    }
    ProcStat s;
    try {
        s.session = static_cast<pid_t>(std::stol(fields[3]));
        s.start_time = std::stoull(fields[19]);
    } catch (const std::exception&) {
        return std::nullopt;
    }
    return s;
}

namespace {

std::optional<ProcStat> stat_of(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!in || !std::getline(in, text)) {
        return std::nullopt;
    }
    return parse_proc_stat(text);
}

} // namespace

ProcessRuntime::ProcessRuntime(std::filesystem::path state_dir, bool warn)
    : m_state_dir(std::move(state_dir)), m_records(m_state_dir) {
    static std::once_flag warned;
    if (warn) {
        std::call_once(warned, [] {
            spdlog::warn("process runtime: jobs run as bare processes with NO isolation — no container, no user, "
                         "memory, CPU or GPU limits, full access to this machine's files and network. Use it only for "
                         "local experiments and tests; share GPUs with --runtime podman or docker.");
        });
    }
    if (!m_state_dir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(m_state_dir, ec);
        reap_leftovers();
        m_records.clear();
    }
}

ProcessRuntime::~ProcessRuntime() {
    m_exits->set(nullptr); // the watchers of jobs killed here wake nobody
    for (auto& [name, job] : m_jobs) {
        if (!job.exit) {
            ::killpg(job.pid, SIGKILL);
            int status = 0;
            wait_for(job.pid, status, 0);
        }
        forget(name);
    }
}

void ProcessRuntime::forget(const std::string& name) { m_records.ended(name); }

void ProcessRuntime::reap_leftovers() {
    std::error_code ec;
    const auto records = m_records.leftovers();
    if (records.empty()) {
        return;
    }
    // One pass over /proc: every process by session.
    std::multimap<pid_t, pid_t> by_session;
    for (const auto& p : std::filesystem::directory_iterator("/proc", ec)) {
        pid_t pid = 0;
        const std::string n = p.path().filename().string();
        if (std::from_chars(n.data(), n.data() + n.size(), pid).ec != std::errc()) {
            continue;
        }
        if (auto st = stat_of(pid)) {
            by_session.emplace(st->session, pid);
        }
    }
    for (const auto& [name, session, start_time] : records) {
        std::vector<pid_t> members;
        const auto leader = session > 0 ? stat_of(static_cast<pid_t>(session)) : std::nullopt;
        // A live leader with another start time is a new process that reuses the pid: not ours.
        if (session > 0 && (!leader || leader->start_time == start_time)) {
            auto [first, last] = by_session.equal_range(static_cast<pid_t>(session));
            for (auto it = first; it != last; ++it) {
                members.push_back(it->second);
            }
        }
        for (pid_t pid : members) {
            ::kill(pid, SIGKILL);
        }
        if (!members.empty()) {
            spdlog::warn("process runtime: killed {} process(es) left running by job {} when the worker last stopped "
                         "without cleaning up",
                         members.size(), name);
        }
    }
}

void ProcessRuntime::watch_exit(pid_t pid) {
    try {
        std::thread([pid, exits = m_exits] {
            siginfo_t info{};
            while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
            }
            exits->fire(); // exited, or reaped already by remove(): either way, look
        }).detach();
    } catch (const std::system_error& e) {
        spdlog::warn("process runtime: no thread to watch pid {} ({}); its exit is seen on the next tick", pid, e.what());
    }
}

Status ProcessRuntime::start(const ContainerSpec& spec) {
    if (auto st = check_container_spec(spec, false); !st) {
        return st;
    }
    if (m_jobs.count(spec.name) != 0) {
        return make_error(ErrorCode::conflict, "a job named " + spec.name + " is already running here");
    }
    auto log = open_log(spec.log_path);
    if (!log) {
        return log.error();
    }

    std::vector<std::string> env;
    for (const auto& [key, value] : spec.env) {
        env.push_back(key + "=" + value);
    }
    auto path_it = spec.env.find("PATH");
    std::string path_var = path_it != spec.env.end() ? path_it->second : k_default_path;
    if (path_it == spec.env.end()) {
        env.push_back("PATH=" + path_var);
    }
    std::filesystem::path exe = resolve_program(spec.argv.front(), path_var);
    if (exe.empty()) {
        return make_error(ErrorCode::io,
                          "job " + spec.name + ": `" + spec.argv.front() + "` not found on PATH " + path_var);
    }
    std::vector<std::string> argv(spec.argv);
    argv.front() = exe.string();
    std::filesystem::path workdir = spec.workdir.empty() ? std::filesystem::current_path() : spec.workdir;

    pid_t job_pid_out = -1;
    const int err = spawn_session(exe, argv, env, workdir, log->get(), job_pid_out);
    if (err != 0) {
        return make_error(ErrorCode::io, "job " + spec.name + ": cannot start " + exe.string() + " in " +
                                             workdir.string() + ": " + std::strerror(err));
    }
    Job job;
    job.pid = job_pid_out;
    m_jobs.emplace(spec.name, job);
    watch_exit(job.pid); // reaped by poll() / remove() through waitpid
    if (!m_state_dir.empty()) {
        // The leader's start time tells it apart from a later process with the same pid.
        const auto st = stat_of(job.pid);
        m_records.started({spec.name, job.pid, st ? st->start_time : 0ULL});
    }
    spdlog::debug("process runtime: started {} (pid {})", spec.name, m_jobs.at(spec.name).pid);
    return {};
}

Result<std::optional<ExitStatus>> ProcessRuntime::poll(const std::string& name) {
    auto it = m_jobs.find(name);
    if (it == m_jobs.end()) {
        return make_error(ErrorCode::not_found, "no job named " + name + " in the process runtime");
    }
    Job& job = it->second;
    if (!job.exit) {
        int status = 0;
        pid_t r = wait_for(job.pid, status, WNOHANG);
        if (r == 0) {
            return std::optional<ExitStatus>{};
        }
        if (r < 0) {
            return make_error(ErrorCode::internal, "waitpid(" + std::to_string(job.pid) + ") for " + name +
                                                       " failed: " + std::strerror(errno));
        }
        job.exit = ExitStatus{exit_code_from_wait_status(status), false};
        // Like a container whose init exits: what the job left running in the background dies with
        // it. Done at once, while the group id cannot have been reused.
        ::killpg(job.pid, SIGKILL);
        forget(name);
    }
    return std::optional<ExitStatus>{job.exit};
}

Status ProcessRuntime::signal(const std::string& name, int signo) {
    auto it = m_jobs.find(name);
    if (it == m_jobs.end()) {
        return make_error(ErrorCode::not_found, "no job named " + name + " in the process runtime");
    }
    if (it->second.exit) {
        return {}; // it has ended; its group was killed when it was reaped
    }
    if (::killpg(it->second.pid, signo) != 0 && errno != ESRCH) {
        return make_error(ErrorCode::io, "cannot signal job " + name + " (process group " +
                                             std::to_string(it->second.pid) + "): " + std::strerror(errno));
    }
    return {};
}

Status ProcessRuntime::remove(const std::string& name) {
    auto it = m_jobs.find(name);
    if (it == m_jobs.end()) {
        return {};
    }
    Job& job = it->second;
    if (!job.exit) {
        ::killpg(job.pid, SIGKILL);
        int status = 0;
        wait_for(job.pid, status, 0);
    }
    m_jobs.erase(it);
    forget(name);
    return {};
}

Result<std::vector<FoundContainer>> ProcessRuntime::list(const std::string&) {
    return std::vector<FoundContainer>{};
}

Status ProcessRuntime::reattach(const std::string& name, const std::filesystem::path&) {
    return make_error(ErrorCode::not_found,
                      "the process runtime cannot re-attach to " + name + ": its processes are not found again");
}

Result<ProcessMarks> ProcessRuntime::process_marks(const std::string& name) {
    auto it = m_jobs.find(name);
    if (it == m_jobs.end()) {
        return make_error(ErrorCode::not_found, "no process job named " + name);
    }
    return ProcessMarks{"", it->second.exit ? 0 : static_cast<std::int64_t>(it->second.pid)};
}

} // namespace gpupool::worker

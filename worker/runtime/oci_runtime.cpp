#include "worker/runtime/oci_runtime.hpp"

#include "core/util/strings.hpp"

#include "core/recipe/image_ref.hpp"
#include "core/util/files.hpp"
#include "worker/runtime/child_io.hpp"
#include "worker/runtime/image_pull.hpp"

#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <condition_variable>
#include <csignal>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace gpupool::worker {

namespace bp = boost::process;
using Clock = std::chrono::steady_clock;

namespace {

using util::lower;

using util::trim;

constexpr int k_waiter_restarts = 3;
constexpr std::size_t k_remove_batch = 32;                  // at most this many names per `rm -f`
constexpr auto k_run_child_bound = std::chrono::seconds(10); // remove(): how long the run child may linger
constexpr auto k_create_bound = std::chrono::seconds(3); // signal(), process_marks(): a container being created

// The last line of an engine's answer when it is a full container id (64 hex digits), else "".
std::string full_container_id(const std::string& out) {
    std::string text{trim(out)};
    text = text.substr(text.find_last_of('\n') == std::string::npos ? 0 : text.find_last_of('\n') + 1);
    const bool ok = text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
                        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                    });
    return ok ? text : std::string();
}

bool says_no_such_container(const std::string& err) {
    std::string e = lower(err);
    return e.find("no such container") != std::string::npos || e.find("no container with") != std::string::npos;
}

// Kills (SIGKILL) and reaps a helper child if it still runs.
void stop_child(std::optional<bp::child>& child) {
    if (!child) {
        return;
    }
    std::error_code ec;
    if (child->running(ec)) {
        child->terminate(ec);
    }
    child.reset();
}

bool has_exited(std::optional<bp::child>& child) {
    std::error_code ec;
    return !child || !child->running(ec);
}

std::vector<std::string> concat(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    std::vector<std::string> out = a;
    out.insert(out.end(), b.begin(), b.end());
    return out;
}

// What the engine said when it could not run a container: it wrote to the job's log after `from`.
// The last line that names an error (podman: `Error: ...`, docker: `docker: Error response ...`),
// else the last line; at most the last 4 KiB are read.
std::string engine_words(const std::filesystem::path& log, std::uintmax_t from) {
    constexpr std::uintmax_t k_tail = 4096;
    std::ifstream in(log, std::ios::binary);
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(log, ec);
    if (!in || ec || size <= from) {
        return {};
    }
    const std::uintmax_t start = std::max(from, size > k_tail ? size - k_tail : 0);
    in.seekg(static_cast<std::streamoff>(start));
    std::string last;
    std::string error_line;
    for (std::string line; std::getline(in, line);) {
        line = std::string(trim(line));
        if (line.empty()) {
            continue;
        }
        last = line;
        if (line.find("Error") != std::string::npos) {
            error_line = line;
        }
    }
    return error_line.empty() ? last : error_line;
}

} // namespace

struct OciRuntime::Tracked {
    std::optional<bp::child> run;      // the foreground `TOOL run` started here, output to the log file
    std::optional<int> run_status;     // its wait status, once reaped and until poll() has read it
    std::optional<bp::child> follower; // TOOL logs -f NAME (re-attached), output to the log file
    std::optional<bp::child> waiter;   // TOOL wait NAME (re-attached), ends when the container does
    std::filesystem::path log_path;
    std::uintmax_t log_start = 0; // the log's size when `run` started: the engine's words come after
    int waiter_restarts = 0;
    std::string id;                 // the container's full id, once known
    std::optional<ExitStatus> exit; // once known
    Clock::time_point exited_at;
    bool drained = false;

    Tracked() = default;
    Tracked(const Tracked&) = delete;
    Tracked& operator=(const Tracked&) = delete;
    ~Tracked() {
        stop_child(run); // SIGKILL: the CLI goes, the container stays (it has its own conmon / shim)
        stop_child(follower);
        stop_child(waiter);
    }
};

// Removes finished containers off the agent's thread: names wait up to `linger` for company, then go
// in one `rm -f` call. The thread starts with the first name; the destructor removes what is left.
class OciRuntime::Remover {
public:
    Remover(const OciRuntime& rt, std::chrono::milliseconds linger) : m_rt(rt), m_linger(linger) {}
    ~Remover() {
        {
            util::MutexLock lock(m_mu);
            m_stop = true;
        }
        m_cv.notify_all();
        if (m_thread.joinable()) {
            m_thread.join();
        }
    }
    Remover(const Remover&) = delete;
    Remover& operator=(const Remover&) = delete;

    void add(const std::string& name) {
        try {
            if (!m_thread.joinable()) {
                m_thread = std::thread([this] { loop(); });
            }
        } catch (const std::system_error& e) {
            spdlog::warn("{}: no thread to remove containers ({}): removing {} now", m_rt.name(), e.what(), name);
            remove_batch({name});
            return;
        }
        {
            util::MutexLock lock(m_mu);
            m_names.push_back(name);
        }
        m_cv.notify_all();
    }

private:
    void loop() {
        while (true) {
            std::vector<std::string> batch;
            {
                util::MutexLock lock(m_mu);
                m_cv.wait(lock, [&]() REQUIRES(m_mu) { return m_stop || !m_names.empty(); });
                if (m_names.empty()) {
                    return; // stopping, nothing left
                }
                m_cv.wait_for(lock, m_linger,
                              [&]() REQUIRES(m_mu) { return m_stop || m_names.size() >= k_remove_batch; });
                const auto n = static_cast<std::ptrdiff_t>(std::min(m_names.size(), k_remove_batch));
                batch.assign(m_names.begin(), m_names.begin() + n);
                m_names.erase(m_names.begin(), m_names.begin() + n);
            }
            remove_batch(batch);
        }
    }

    // Names already gone fail the call but the others are removed. A failure is only logged: a later
    // run's list() finds what is left, and the agent removes containers it has no spool for.
    void remove_batch(const std::vector<std::string>& names) const {
        auto ran = m_rt.run_tool(m_rt.rm_args(names));
        if (!ran || (ran->exit_code != 0 && !says_no_such_container(ran->err))) {
            const std::string what = "rm of " + std::to_string(names.size()) + " finished container(s)";
            spdlog::warn("{}", ran ? m_rt.tool_error(what, *ran).message : what + ": " + ran.error().message);
        }
    }

    const OciRuntime& m_rt;
    const std::chrono::milliseconds m_linger;
    util::Mutex m_mu;
    std::condition_variable_any m_cv;
    std::vector<std::string> m_names GUARDED_BY(m_mu);
    bool m_stop GUARDED_BY(m_mu) = false;
    std::thread m_thread; // only the agent's thread starts and joins it
};

OciRuntime::OciRuntime(OciConfig config) : m_config(std::move(config)) {
    std::string program = m_config.program.empty() ? to_string(m_config.tool) : m_config.program;
    std::filesystem::path exe =
        program.find('/') != std::string::npos ? std::filesystem::path(program) : bp::search_path(program);
    if (exe.empty() || ::access(exe.c_str(), X_OK) != 0) {
        m_missing = make_error(ErrorCode::io, program + " not found on PATH; install it or use --runtime " +
                                                  (m_config.tool == OciTool::podman ? "docker" : "podman") +
                                                  " (or --runtime process, which isolates nothing)");
    }
    m_program = exe.string();
    m_remover = std::make_unique<Remover>(*this, m_config.remove_linger);
}

OciRuntime::~OciRuntime() {
    m_exits->set(nullptr); // the watchers of children killed here wake nobody
    m_tracked.clear();     // kills the CLIs; the containers run on
    m_remover.reset();     // removes the finished containers still waiting
}

std::vector<std::string> OciRuntime::rm_args(const std::vector<std::string>& names) const {
    std::vector<std::string> args{"rm", "-f"};
    if (m_config.tool == OciTool::podman) {
        args.insert(args.end(), {"-t", "0"}); // kill at once, as docker's rm -f does
    }
    args.insert(args.end(), names.begin(), names.end());
    return args;
}
Error OciRuntime::tool_error(const std::string& what, const ToolOutput& out) const {
    std::string err{trim(out.err)};
    return make_error(ErrorCode::io, std::string(to_string(m_config.tool)) + " " + what + " failed (exit " +
                                         std::to_string(out.exit_code) + ")" + (err.empty() ? "" : ": " + err));
}

Result<OciRuntime::ToolOutput> OciRuntime::run_tool(const std::vector<std::string>& args,
                                                    const std::filesystem::path& cwd, std::chrono::seconds bound) const {
    if (m_missing) {
        return *m_missing;
    }
    UniqueFd out_fd(::memfd_create("gpupool-tool-stdout", MFD_CLOEXEC));
    UniqueFd err_fd(::memfd_create("gpupool-tool-stderr", MFD_CLOEXEC));
    if (out_fd.get() < 0 || err_fd.get() < 0) {
        return make_error(ErrorCode::io, "memfd_create failed while running " + m_program);
    }
    const int out = out_fd.get();
    const int err = err_fd.get();
    std::vector<std::string> full = m_config.global_args;
    full.insert(full.end(), args.begin(), args.end());
    ToolOutput result;
    try {
        std::string dir = cwd.empty() ? std::filesystem::current_path().string() : cwd.string();
        bp::child c(
            bp::exe = m_program, bp::args = full, bp::std_in < bp::null, bp::start_dir = dir,
            bp::extend::on_exec_setup = [out, err](auto&) {
                ::dup2(out, STDOUT_FILENO);
                ::dup2(err, STDERR_FILENO);
                child_redirect_output_and_seal(-1);
            });
        const auto limit = bound.count() > 0 ? bound : m_config.command_bound;
        auto deadline = Clock::now() + limit;
        auto pause = std::chrono::milliseconds(1);
        while (c.running()) {
            if (Clock::now() > deadline) {
                std::error_code ec;
                c.terminate(ec);
                return make_error(ErrorCode::io, std::string(to_string(m_config.tool)) + " " + args.front() +
                                                     " did not finish within " +
                                                     std::to_string(limit.count()) + " s");
            }
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::milliseconds(20));
        }
        result.exit_code = c.exit_code();
    } catch (const std::exception& e) {
        return make_error(ErrorCode::io, "cannot run " + m_program + ": " + e.what());
    }
    result.out = util::read_all(out);
    result.err = util::read_all(err);
    return result;
}

void OciRuntime::watch_exit(int pid) {
    // The pidfd is opened here, on the thread that reaps the child, so it names this very process.
    // glibc 2.36's <sys/pidfd.h> lacks extern "C": the system call itself.
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) {
        spdlog::debug("{}: no pidfd for pid {} ({}); its exit is seen on the next tick", to_string(m_config.tool), pid,
                      std::strerror(errno));
        return;
    }
    try {
        std::thread([fd, exits = m_exits] {
            pollfd p{fd, POLLIN, 0};
            while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
            }
            ::close(fd);
            exits->fire(); // ended (or reaped already): either way, look
        }).detach();
    } catch (const std::system_error& e) {
        ::close(fd);
        spdlog::warn("{}: no thread to watch pid {} ({}); its exit is seen on the next tick", to_string(m_config.tool),
                     pid, e.what());
    }
}

Status OciRuntime::follow(const std::string& name, Tracked& t, bool truncate) {
    auto log = open_log(t.log_path, truncate ? OpenLog::truncate_then_append : OpenLog::append);
    if (!log) {
        return log.error();
    }
    const int fd = log->get();
    try {
        t.follower.emplace(
            bp::exe = m_program, bp::args = concat(m_config.global_args, {"logs", "-f", name}), bp::std_in < bp::null,
            bp::extend::on_exec_setup = [fd](auto&) { child_redirect_output_and_seal(fd); });
    } catch (const std::exception& e) {
        return make_error(ErrorCode::io, "cannot start the log follower for " + name + ": " + e.what());
    }
    watch_exit(t.follower->id());
    return wait_for_exit(name, t);
}

Status OciRuntime::wait_for_exit(const std::string& name, Tracked& t) {
    try {
        t.waiter.emplace(
            bp::exe = m_program, bp::args = concat(m_config.global_args, {"wait", name}),
            bp::std_in<bp::null, bp::std_out> bp::null, bp::std_err > bp::null,
            bp::extend::on_exec_setup = [](auto&) { child_redirect_output_and_seal(-1); });
    } catch (const std::exception& e) {
        return make_error(ErrorCode::io, "cannot wait for " + name + ": " + e.what());
    }
    watch_exit(t.waiter->id());
    return {};
}

Status OciRuntime::start(const ContainerSpec& spec) {
    if (m_missing) {
        return *m_missing;
    }
    if (auto st = check_container_spec(spec, true); !st) {
        return st;
    }
    if (m_tracked.count(spec.name) != 0) {
        return make_error(ErrorCode::conflict, "a container named " + spec.name + " was already started here");
    }
    auto log = open_log(spec.log_path);
    if (!log) {
        return log.error();
    }
    auto t = std::make_unique<Tracked>();
    t->log_path = spec.log_path;
    struct stat log_stat {};
    if (::fstat(log->get(), &log_stat) == 0) {
        t->log_start = static_cast<std::uintmax_t>(log_stat.st_size);
    }
    const int fd = log->get();
    const pid_t worker = ::getpid();
    const std::string log_dir = std::filesystem::absolute(spec.log_path).parent_path().string();
    try {
        t->run.emplace(
            bp::exe = m_program, bp::args = concat(m_config.global_args, build_run_argv(m_config.tool, spec, m_config.run_args)),
            bp::std_in < bp::null, bp::start_dir = log_dir, bp::extend::on_exec_setup = [fd, worker](auto&) {
                ::setpgid(0, 0); // the worker's terminal and its process group's signals stay away
                ::prctl(PR_SET_PDEATHSIG, SIGKILL); // dies with the worker; the container runs on
                if (::getppid() != worker) {
                    ::_exit(127);
                }
                child_redirect_output_and_seal(fd);
            });
    } catch (const std::exception& e) {
        return make_error(ErrorCode::io, "cannot run " + m_program + " for " + spec.name + ": " + e.what());
    }
    watch_exit(t->run->id());
    spdlog::debug("{}: started {} (pid {})", to_string(m_config.tool), spec.name, t->run->id());
    m_tracked[spec.name] = std::move(t);
    return {};
}

Status OciRuntime::ensure_image(const std::string& image) {
    if (auto st = recipe::validate_image_reference(image); !st) {
        return make_error(ErrorCode::not_found, "invalid image reference `" + image + "`: " + st.error().message);
    }
    const std::string ref = recipe::qualified_image(image); // as `run` names it (build_run_argv)
    auto present = run_tool({"image", "inspect", "--format", "{{.Id}}", ref});
    if (!present) {
        return present.error();
    }
    if (present->exit_code == 0) {
        return {};
    }
    auto pulled = run_tool({"pull", "--quiet", ref}, {}, m_config.pull_bound);
    if (!pulled) {
        return pulled.error();
    }
    if (pulled->exit_code == 0) {
        return {};
    }
    const std::string line = pull_error_line(pulled->err);
    const bool job = classify_pull_failure(pulled->err) == PullVerdict::image_unavailable;
    if (job) {
        return make_error(ErrorCode::not_found, line);
    }
    return make_error(ErrorCode::io,
                      name() + " pull " + ref + " failed (exit " + std::to_string(pulled->exit_code) + "): " + line);
}

Result<ImageIdentity> OciRuntime::image_identity(const std::string& image) {
    if (auto st = recipe::validate_image_reference(image); !st) {
        return make_error(ErrorCode::invalid_input, "invalid image reference `" + image + "`: " + st.error().message);
    }
    const std::string ref = recipe::qualified_image(image); // as `run` names it (build_run_argv)
    auto ran = run_tool({"image", "inspect", ref});
    if (!ran) {
        return ran.error();
    }
    if (ran->exit_code != 0) {
        return tool_error("image inspect " + ref, *ran);
    }
    return parse_image_identity(m_config.tool, ran->out, ref);
}

Status OciRuntime::check() {
    auto ran = run_tool({"info"});
    if (!ran) {
        return ran.error();
    }
    if (ran->exit_code != 0) {
        Error e = tool_error("info", *ran);
        e.message = "the " + name() + " engine is not usable (" + e.message + "); " +
                    (m_config.tool == OciTool::docker
                         ? "start the docker daemon (or point to one with --runtime-arg -H=…), or use --runtime podman"
                         : "check `podman info` as the user the worker runs as");
        return e;
    }
    return {};
}

Result<ContainerState> OciRuntime::inspect_state(const std::string& name) const {
    auto ran = run_tool({"container", "inspect", "--format", "{{json .State}}", name});
    if (!ran) {
        return ran.error();
    }
    if (ran->exit_code != 0) {
        Error e = tool_error("inspect " + name, *ran);
        if (says_no_such_container(ran->err)) {
            e.code = ErrorCode::not_found;
        }
        return e;
    }
    return parse_state_json(ran->out);
}

Result<std::optional<ExitStatus>> OciRuntime::poll(const std::string& name) {
    auto it = m_tracked.find(name);
    if (it == m_tracked.end()) {
        return make_error(ErrorCode::not_found, "no container named " + name + " was started or re-attached by this " +
                                                    to_string(m_config.tool) + " runtime");
    }
    Tracked& t = *it->second;
    if (t.exit && t.drained) {
        return std::optional<ExitStatus>{t.exit};
    }
    return t.run || t.run_status ? poll_run(name, t) : poll_follower(name, t);
}

// The foreground `run` child: its exit status is the container's, but where it may be the engine's.
Result<std::optional<ExitStatus>> OciRuntime::poll_run(const std::string& name, Tracked& t) {
    if (t.run) {
        std::error_code ec;
        if (t.run->running(ec)) {
            return std::optional<ExitStatus>{};
        }
        t.run_status = t.run->native_exit_code();
        t.run.reset();
    }
    const int status = *t.run_status;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code >= 0 && (code < 125 || code > 127) && code != 137) {
        t.exit = ExitStatus{code, false};
        t.drained = true; // the CLI copied everything before it exited
        return std::optional<ExitStatus>{t.exit};
    }
    auto state = code >= 0 ? inspect_state(name) : Result<ContainerState>(ContainerState{});
    // 125-127 from a container that never ran, or is not there (a missing image): the engine's failure.
    if (code >= 0 && code != 137 &&
        (state ? !state->running && (!state->ran || state->exit_code != code)
               : state.error().code == ErrorCode::not_found)) {
        const std::string words = engine_words(t.log_path, t.log_start);
        return make_error(ErrorCode::not_found, std::string(to_string(m_config.tool)) + " could not run " + name +
                                                    " (exit " + std::to_string(code) + "; the container never ran)" +
                                                    (words.empty() ? "" : ": " + words));
    }
    if (!state) {
        return state.error(); // not_found after 137: removed behind the worker's back; else asked again
    }
    if (code < 0 || state->running) {
        // The CLI ended without an exit of its own (killed, or reaped elsewhere) and the container may
        // run on: follow it as after a restart (the log is replayed from the start).
        spdlog::warn("{}: the run child of {} ended (wait status {}) while the container may run; following it",
                     to_string(m_config.tool), name, status);
        t.run_status.reset();
        if (auto st = follow(name, t, true); !st) {
            return st.error();
        }
        return std::optional<ExitStatus>{};
    }
    t.exit = ExitStatus{code, state->oom_killed};
    t.drained = true;
    return std::optional<ExitStatus>{t.exit};
}

// A re-attached container: the waiter says when it has ended, inspect how, the follower when the log
// is complete.
Result<std::optional<ExitStatus>> OciRuntime::poll_follower(const std::string& name, Tracked& t) {
    if (!t.exit) {
        if (!has_exited(t.waiter)) {
            return std::optional<ExitStatus>{};
        }
        auto state = inspect_state(name);
        if (!state) {
            return state.error();
        }
        if (state->running) {
            // The waiter gave up early (engine restart?): wait again, a few times.
            if (++t.waiter_restarts > k_waiter_restarts) {
                return make_error(ErrorCode::io, std::string(to_string(m_config.tool)) + " wait " + name +
                                                     " keeps ending while the container runs");
            }
            if (auto st = wait_for_exit(name, t); !st) {
                return st.error();
            }
            return std::optional<ExitStatus>{};
        }
        t.exit = ExitStatus{state->exit_code, state->oom_killed};
        t.exited_at = Clock::now();
    }
    if (!has_exited(t.follower)) {
        if (Clock::now() - t.exited_at < m_config.drain_bound) {
            return std::optional<ExitStatus>{};
        }
        spdlog::warn("{}: the log follower of {} did not finish within {} ms of its exit; its log may be incomplete",
                     to_string(m_config.tool), name, m_config.drain_bound.count());
    }
    stop_child(t.follower);
    stop_child(t.waiter);
    t.drained = true;
    return std::optional<ExitStatus>{t.exit};
}

Status OciRuntime::signal(const std::string& name, int signo) {
    auto it = m_tracked.find(name);
    Tracked* t = it == m_tracked.end() ? nullptr : it->second.get();
    const auto deadline = Clock::now() + k_create_bound;
    while (true) {
        auto ran = run_tool({"kill", "--signal", std::to_string(signo), name});
        if (!ran) {
            return ran.error();
        }
        if (ran->exit_code == 0) {
            return {};
        }
        const bool not_running = lower(ran->err).find("not running") != std::string::npos;
        const bool missing = says_no_such_container(ran->err);
        // Just started: the run child may not have created (or started) the container yet.
        if ((not_running || missing) && t != nullptr && t->run && !has_exited(t->run) && Clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            continue;
        }
        if (not_running) {
            return {}; // it has ended already: nothing to signal
        }
        Error e = tool_error("kill " + name, *ran);
        if (missing) {
            e.code = ErrorCode::not_found;
        }
        return e;
    }
}

Status OciRuntime::remove(const std::string& name) {
    auto it = m_tracked.find(name);
    if (it == m_tracked.end()) {
        return remove_now(name, nullptr);
    }
    std::unique_ptr<Tracked> t = std::move(it->second);
    m_tracked.erase(it);
    if (t->exit && t->drained) {
        t.reset(); // stops a follower first: no engine error lands in the job's log
        m_remover->add(name);
        return {};
    }
    return remove_now(name, std::move(t));
}

// `rm -f` now, for a container that may run. A run child still going may not have created the
// container yet when the first `rm -f` comes: it is repeated until the child has ended.
Status OciRuntime::remove_now(const std::string& name, std::unique_ptr<Tracked> t) {
    std::optional<bp::child> run;
    if (t) {
        run = std::move(t->run);
        t.reset(); // stops a follower first: no engine error lands in the job's log
    }
    const auto args = rm_args({name});
    const auto deadline = Clock::now() + k_run_child_bound;
    while (true) {
        Status removed;
        if (auto ran = run_tool(args); !ran) {
            removed = ran.error();
        } else if (ran->exit_code != 0 && !says_no_such_container(ran->err)) {
            removed = tool_error("rm " + name, *ran);
        }
        for (int i = 0; i < 50 && !has_exited(run); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        if (has_exited(run) || Clock::now() > deadline) {
            if (!has_exited(run)) {
                spdlog::warn("{}: the run child of {} outlived its container's removal; killing it",
                             to_string(m_config.tool), name);
            }
            stop_child(run);
            return removed;
        }
    }
}

Result<std::vector<FoundContainer>> OciRuntime::list(const std::string& worker_label) {
    // A container removed between ps and inspect (by the remover, say) may fail the whole inspect:
    // then both are asked again, a few times.
    for (int attempt = 1;; ++attempt) {
        auto ids = run_tool({"ps", "-a", "-q", "--no-trunc", "--filter", "label=gpupool.worker=" + worker_label});
        if (!ids) {
            return ids.error();
        }
        if (ids->exit_code != 0) {
            return tool_error("ps", *ids);
        }
        std::vector<std::string> args{"container", "inspect"};
        std::istringstream lines(ids->out);
        for (std::string id; std::getline(lines, id);) {
            if (!trim(id).empty()) {
                args.emplace_back(trim(id));
            }
        }
        if (args.size() == 2) {
            return std::vector<FoundContainer>{};
        }
        auto inspected = run_tool(args);
        if (!inspected) {
            return inspected.error();
        }
        auto found = parse_inspect_json(inspected->out);
        if (found || inspected->exit_code == 0 || attempt == 3) {
            return found || inspected->exit_code == 0 ? found
                                                      : Result<std::vector<FoundContainer>>(tool_error("inspect", *inspected));
        }
    }
}

Status OciRuntime::reattach(const std::string& name, const std::filesystem::path& log_path) {
    if (auto state = inspect_state(name); !state) {
        return state.error();
    }
    m_tracked.erase(name);
    auto t = std::make_unique<Tracked>();
    t->log_path = log_path;
    if (auto st = follow(name, *t, true); !st) {
        return st;
    }
    m_tracked[name] = std::move(t);
    return {};
}

Result<ProcessMarks> OciRuntime::process_marks(const std::string& name) {
    auto it = m_tracked.find(name);
    if (it == m_tracked.end()) {
        return make_error(ErrorCode::not_found, "no container named " + name + " was started or re-attached by this " +
                                                    to_string(m_config.tool) + " runtime");
    }
    Tracked& t = *it->second;
    const auto deadline = Clock::now() + k_create_bound;
    while (t.id.empty()) {
        auto ran = run_tool({"container", "inspect", "--format", "{{.Id}}", name});
        if (!ran) {
            return ran.error();
        }
        if (ran->exit_code != 0) {
            if (says_no_such_container(ran->err) && t.run && !has_exited(t.run) && Clock::now() < deadline) {
                std::this_thread::sleep_for(std::chrono::milliseconds(50)); // just started: not created yet
                continue;
            }
            return tool_error("inspect " + name, *ran);
        }
        t.id = full_container_id(ran->out);
        if (t.id.empty()) {
            return make_error(ErrorCode::io,
                              "unexpected container id for " + name + ": `" + std::string(trim(ran->out)) + "`");
        }
    }
    return ProcessMarks{t.id, 0};
}

} // namespace gpupool::worker

#include "worker/runtime/oci_runtime.hpp"

#include "core/util/files.hpp"

#include "worker/runtime/child_io.hpp"

#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

namespace gpupool::worker {

namespace bp = boost::process;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* k_ulimit_nofile = "nofile=4096:4096";
constexpr const char* k_ulimit_nproc = "nproc=4096:4096";
constexpr const char* k_tmpfs = "/tmp:rw,nosuid,nodev,size=512m,mode=1777";
constexpr int k_waiter_restarts = 3;

// 1500 milli-CPU -> "1.5"; 2000 -> "2".
std::string cpus_flag(std::int64_t milli) {
    std::string out = std::to_string(milli / 1000);
    std::int64_t frac = milli % 1000;
    if (frac != 0) {
        std::string digits = std::to_string(frac);
        digits.insert(0, 3 - digits.size(), '0');
        while (digits.back() == '0') {
            digits.pop_back();
        }
        out += "." + digits;
    }
    return out;
}

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

std::string trim(std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) {
        s.pop_back();
    }
    std::size_t start = 0;
    while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start])) != 0) {
        ++start;
    }
    return s.substr(start);
}

// The last line of an engine's answer when it is a full container id (64 hex digits), else "".
std::string full_container_id(const std::string& out) {
    std::string text = trim(out);
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

std::vector<std::string> concat(const std::vector<std::string>& a, std::initializer_list<std::string> b) {
    std::vector<std::string> out = a;
    out.insert(out.end(), b);
    return out;
}

} // namespace

const char* to_string(OciTool tool) {
    return tool == OciTool::podman ? "podman" : "docker";
}

std::vector<std::string> build_run_argv(OciTool tool, const ContainerSpec& spec,
                                        const std::vector<std::string>& extra_run_args) {
    std::vector<std::string> a{"run", "-d", "--name", spec.name};
    for (const auto& [key, value] : spec.labels) {
        a.insert(a.end(), {"--label", key + "=" + value});
    }
    // The engine's own log store is what `logs -f` replays (and replays again after a reattach).
    a.insert(a.end(), {"--log-driver", tool == OciTool::podman ? "k8s-file" : "json-file"});
    a.insert(a.end(), {"--init", "--cap-drop=ALL", "--security-opt", "no-new-privileges", "--user", spec.user});
    if (spec.pids_limit > 0) {
        a.insert(a.end(), {"--pids-limit", std::to_string(spec.pids_limit)});
    }
    if (spec.memory_mib > 0) {
        std::string mem = std::to_string(spec.memory_mib) + "m";
        a.insert(a.end(), {"--memory", mem, "--memory-swap", mem});
    }
    if (spec.cpu_milli > 0) {
        a.insert(a.end(), {"--cpus", cpus_flag(spec.cpu_milli)});
    }
    a.insert(a.end(), {"--ulimit", k_ulimit_nofile, "--ulimit", k_ulimit_nproc});
    if (spec.read_only_root) {
        a.insert(a.end(), {"--read-only", "--tmpfs", k_tmpfs});
    }
    if (spec.host_ipc) {
        a.push_back("--ipc=host"); // an MPS client talks to the daemon over the host's shared memory
    }
    for (const Mount& m : spec.mounts) {
        a.insert(a.end(), {"-v", m.host.string() + ":" + m.container + (m.read_only ? ":ro" : "")});
    }
    for (const auto& [key, value] : spec.env) {
        a.insert(a.end(), {"-e", key + "=" + value});
    }
    if (spec.gpu_index) {
        std::string index = std::to_string(*spec.gpu_index);
        if (tool == OciTool::podman) {
            a.insert(a.end(), {"--device", "nvidia.com/gpu=" + index});
        } else {
            a.insert(a.end(), {"--gpus", "device=" + index});
        }
    }
    a.insert(a.end(), extra_run_args.begin(), extra_run_args.end());
    // Options end here: whatever the image is, the engine cannot read it (or anything after it) as a flag.
    a.push_back("--");
    a.push_back(spec.image);
    a.insert(a.end(), spec.argv.begin(), spec.argv.end());
    return a;
}

Result<std::vector<FoundContainer>> parse_inspect_json(std::string_view json) {
    try {
        auto doc = nlohmann::json::parse(json);
        if (!doc.is_array()) {
            return make_error(ErrorCode::io, "container inspect did not answer a JSON array");
        }
        std::vector<FoundContainer> out;
        for (const auto& c : doc) {
            FoundContainer f;
            f.name = c.at("Name").get<std::string>();
            if (!f.name.empty() && f.name.front() == '/') {
                f.name.erase(0, 1); // docker's names start with a slash
            }
            const auto& config = c.at("Config");
            if (config.contains("Labels") && config.at("Labels").is_object()) {
                for (const auto& [key, value] : config.at("Labels").items()) {
                    f.labels[key] = value.get<std::string>();
                }
            }
            f.running = c.at("State").at("Running").get<bool>();
            out.push_back(std::move(f));
        }
        return out;
    } catch (const nlohmann::json::exception& e) {
        return make_error(ErrorCode::io, std::string("cannot read container inspect JSON: ") + e.what());
    }
}

struct OciRuntime::Tracked {
    std::optional<bp::child> follower; // TOOL logs -f NAME, output to the job's log file
    std::optional<bp::child> waiter;   // TOOL wait NAME, ends when the container does
    int waiter_restarts = 0;
    std::string id;                 // the container's full id, once known
    std::optional<ExitStatus> exit; // from inspect, once the waiter has ended
    Clock::time_point exited_at;
    bool drained = false;

    Tracked() = default;
    Tracked(const Tracked&) = delete;
    Tracked& operator=(const Tracked&) = delete;
    ~Tracked() {
        stop_child(follower);
        stop_child(waiter);
    }
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
}

OciRuntime::~OciRuntime() = default;

Error OciRuntime::tool_error(const std::string& what, const ToolOutput& out) const {
    std::string err = trim(out.err);
    return make_error(ErrorCode::io, std::string(to_string(m_config.tool)) + " " + what + " failed (exit " +
                                         std::to_string(out.exit_code) + ")" + (err.empty() ? "" : ": " + err));
}

Result<OciRuntime::ToolOutput> OciRuntime::run_tool(const std::vector<std::string>& args,
                                                    const std::filesystem::path& cwd) const {
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
        auto deadline = Clock::now() + m_config.command_bound;
        auto pause = std::chrono::milliseconds(1);
        while (c.running()) {
            if (Clock::now() > deadline) {
                std::error_code ec;
                c.terminate(ec);
                return make_error(ErrorCode::io, std::string(to_string(m_config.tool)) + " " + args.front() +
                                                     " did not finish within " +
                                                     std::to_string(m_config.command_bound.count()) + " s");
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

Status OciRuntime::follow(const std::string& name, const std::filesystem::path& log_path, bool truncate) {
    auto log = open_log(log_path, truncate ? OpenLog::truncate_then_append : OpenLog::append);
    if (!log) {
        return log.error();
    }
    auto tracked = std::make_unique<Tracked>();
    const int fd = log->get();
    try {
        tracked->follower.emplace(
            bp::exe = m_program, bp::args = concat(m_config.global_args, {"logs", "-f", name}), bp::std_in < bp::null,
            bp::extend::on_exec_setup = [fd](auto&) { child_redirect_output_and_seal(fd); });
        tracked->waiter.emplace(
            bp::exe = m_program, bp::args = concat(m_config.global_args, {"wait", name}),
            bp::std_in<bp::null, bp::std_out> bp::null, bp::std_err > bp::null,
            bp::extend::on_exec_setup = [](auto&) { child_redirect_output_and_seal(-1); });
    } catch (const std::exception& e) {
        return make_error(ErrorCode::io, "cannot start the log follower for " + name + ": " + e.what());
    }
    m_tracked[name] = std::move(tracked);
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
    // Fail on an unusable log file before anything runs.
    if (auto log = open_log(spec.log_path); !log) {
        return log.error();
    }
    std::filesystem::path log_dir = std::filesystem::absolute(spec.log_path).parent_path();
    auto ran = run_tool(build_run_argv(m_config.tool, spec, m_config.run_args), log_dir);
    if (!ran) {
        return ran.error();
    }
    if (ran->exit_code != 0) {
        return tool_error("run " + spec.name, *ran);
    }
    spdlog::debug("{}: started {} ({})", to_string(m_config.tool), spec.name, trim(ran->out));
    if (auto st = follow(spec.name, spec.log_path, false); !st) {
        return st;
    }
    m_tracked[spec.name]->id = full_container_id(ran->out); // `run -d` answers the id ("" if not)
    return {};
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

Result<ExitStatus> OciRuntime::inspect_exit(const std::string& name, bool& running) const {
    auto ran = run_tool(
        {"container", "inspect", "--format", "{{.State.Running}} {{.State.ExitCode}} {{.State.OOMKilled}}", name});
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
    std::string text = trim(ran->out);
    std::size_t s1 = text.find(' ');
    std::size_t s2 = text.find(' ', s1 == std::string::npos ? s1 : s1 + 1);
    if (s1 == std::string::npos || s2 == std::string::npos) {
        return make_error(ErrorCode::io, "unexpected inspect answer for " + name + ": `" + text + "`");
    }
    running = text.substr(0, s1) == "true";
    ExitStatus status;
    try {
        status.exit_code = std::stoi(text.substr(s1 + 1, s2 - s1 - 1));
    } catch (const std::exception&) {
        return make_error(ErrorCode::io, "unexpected inspect answer for " + name + ": `" + text + "`");
    }
    status.oom_killed = text.substr(s2 + 1) == "true";
    return status;
}

Result<std::optional<ExitStatus>> OciRuntime::poll(const std::string& name) {
    auto it = m_tracked.find(name);
    if (it == m_tracked.end()) {
        return make_error(ErrorCode::not_found, "no container named " + name + " was started or re-attached by this " +
                                                    to_string(m_config.tool) + " runtime");
    }
    Tracked& t = *it->second;
    if (!t.exit) {
        if (!has_exited(t.waiter)) {
            return std::optional<ExitStatus>{};
        }
        bool running = false;
        auto status = inspect_exit(name, running);
        if (!status) {
            return status.error();
        }
        if (running) {
            // The waiter gave up early (engine restart?): wait again, a few times.
            if (++t.waiter_restarts > k_waiter_restarts) {
                return make_error(ErrorCode::io, std::string(to_string(m_config.tool)) + " wait " + name +
                                                     " keeps ending while the container runs");
            }
            try {
                t.waiter.emplace(
                    bp::exe = m_program, bp::args = concat(m_config.global_args, {"wait", name}),
                    bp::std_in<bp::null, bp::std_out> bp::null, bp::std_err > bp::null,
                    bp::extend::on_exec_setup = [](auto&) { child_redirect_output_and_seal(-1); });
            } catch (const std::exception& e) {
                return make_error(ErrorCode::io, "cannot wait for " + name + ": " + e.what());
            }
            return std::optional<ExitStatus>{};
        }
        t.exit = *status;
        t.exited_at = Clock::now();
    }
    if (!t.drained) {
        if (!has_exited(t.follower)) {
            if (Clock::now() - t.exited_at < m_config.drain_bound) {
                return std::optional<ExitStatus>{};
            }
            spdlog::warn("{}: the log follower of {} did not finish within {} ms of its exit; its log may be "
                         "incomplete",
                         to_string(m_config.tool), name, m_config.drain_bound.count());
        }
        stop_child(t.follower);
        t.drained = true;
    }
    return std::optional<ExitStatus>{t.exit};
}

Status OciRuntime::signal(const std::string& name, int signo) {
    auto ran = run_tool({"kill", "--signal", std::to_string(signo), name});
    if (!ran) {
        return ran.error();
    }
    if (ran->exit_code != 0) {
        if (lower(ran->err).find("not running") != std::string::npos) {
            return {}; // it has ended already: nothing to signal
        }
        Error e = tool_error("kill " + name, *ran);
        if (says_no_such_container(ran->err)) {
            e.code = ErrorCode::not_found;
        }
        return e;
    }
    return {};
}

Status OciRuntime::remove(const std::string& name) {
    m_tracked.erase(name); // stops the follower first: no engine error lands in the job's log
    std::vector<std::string> args{"rm", "-f"};
    if (m_config.tool == OciTool::podman) {
        args.insert(args.end(), {"-t", "0"}); // kill at once, as docker's rm -f does
    }
    args.push_back(name);
    auto ran = run_tool(args);
    if (!ran) {
        return ran.error();
    }
    if (ran->exit_code != 0 && !says_no_such_container(ran->err)) {
        return tool_error("rm " + name, *ran);
    }
    return {};
}

Result<std::vector<FoundContainer>> OciRuntime::list(const std::string& worker_label) {
    auto ids = run_tool({"ps", "-a", "-q", "--no-trunc", "--filter", "label=gpupool.worker=" + worker_label});
    if (!ids) {
        return ids.error();
    }
    if (ids->exit_code != 0) {
        return tool_error("ps", *ids);
    }
    std::vector<std::string> args{"container", "inspect"};
    std::size_t start = 0;
    const std::string& out = ids->out;
    while (start < out.size()) {
        std::size_t nl = out.find('\n', start);
        std::string id = trim(out.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
        if (!id.empty()) {
            args.push_back(id);
        }
        start = nl == std::string::npos ? out.size() : nl + 1;
    }
    if (args.size() == 2) {
        return std::vector<FoundContainer>{};
    }
    auto inspected = run_tool(args);
    if (!inspected) {
        return inspected.error();
    }
    // A container removed between ps and inspect fails the call but the others are still answered.
    auto found = parse_inspect_json(inspected->out);
    if (!found && inspected->exit_code != 0) {
        return tool_error("inspect", *inspected);
    }
    return found;
}

Status OciRuntime::reattach(const std::string& name, const std::filesystem::path& log_path) {
    bool running = false;
    auto status = inspect_exit(name, running);
    if (!status) {
        return status.error();
    }
    m_tracked.erase(name);
    return follow(name, log_path, true);
}

Result<ProcessMarks> OciRuntime::process_marks(const std::string& name) {
    auto it = m_tracked.find(name);
    if (it == m_tracked.end()) {
        return make_error(ErrorCode::not_found, "no container named " + name + " was started or re-attached by this " +
                                                    to_string(m_config.tool) + " runtime");
    }
    if (it->second->id.empty()) {
        auto ran = run_tool({"container", "inspect", "--format", "{{.Id}}", name});
        if (!ran) {
            return ran.error();
        }
        if (ran->exit_code != 0) {
            return tool_error("inspect " + name, *ran);
        }
        it->second->id = full_container_id(ran->out);
        if (it->second->id.empty()) {
            return make_error(ErrorCode::io, "unexpected container id for " + name + ": `" + trim(ran->out) + "`");
        }
    }
    return ProcessMarks{it->second->id, 0};
}

} // namespace gpupool::worker

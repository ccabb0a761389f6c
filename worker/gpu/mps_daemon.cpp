#include "worker/gpu/mps_daemon.hpp"

#include "core/util/strings.hpp"

#include "core/util/thread_safety.hpp"
#include "worker/gpu/gpu_probe.hpp"
#include "worker/runtime/bounded_run.hpp"

#include <boost/process/search_path.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <sys/stat.h>
#include <thread>

namespace gpupool::worker {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

using util::trim;

constexpr const char* k_pid_file = "nvidia-cuda-mps-control.pid"; // in the pipe directory
constexpr milliseconds k_poll_every{50};
constexpr milliseconds k_kill_wait{2000};
constexpr std::size_t k_said_max = 400; // how much of what the program said goes into an Error

// What a run of the program said, for an Error: its stderr, else its stdout, shortened.
std::string said(const BoundedRun& run) {
    std::string text{trim(run.err.empty() ? run.out : run.err)};
    if (text.size() > k_said_max) {
        text = text.substr(0, k_said_max) + "...";
    }
    return text.empty() ? std::string() : ": " + text;
}

std::string first_line(const fs::path& p) {
    std::ifstream in(p);
    std::string line;
    std::getline(in, line);
    return std::string(trim(line));
}

// Whether `pid` is still a live MPS program (not gone, not a zombie, not a reused pid).
bool mps_process_alive(pid_t pid) {
    const fs::path proc = fs::path("/proc") / std::to_string(pid);
    if (first_line(proc / "comm").rfind("nvidia-cuda-mps", 0) != 0) {
        return false;
    }
    std::ifstream status(proc / "status");
    for (std::string line; std::getline(status, line);) {
        if (line.rfind("State:", 0) == 0) {
            return trim(line.substr(6)).rfind('Z', 0) != 0;
        }
    }
    return false;
}

bool wait_until(const std::function<bool()>& done, milliseconds within) {
    const auto deadline = Clock::now() + within;
    while (!done()) {
        if (Clock::now() >= deadline) {
            return false;
        }
        std::this_thread::sleep_for(k_poll_every);
    }
    return true;
}

// Creates `dir` and gives it `mode` (the umask does not get a say). Refuses a link, something that is
// not a directory, or a directory of another user where the MPS directories belong: the worker's
// jobs and its daemon trust what is there.
Status make_dir(const fs::path& dir, mode_t mode) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
        return make_error(ErrorCode::io, "cannot create the MPS directory " + dir.string() + ": " + ec.message());
    }
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0) {
        return make_error(ErrorCode::io, "cannot read " + dir.string() + ": " + std::strerror(errno));
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
        return make_error(ErrorCode::io, "the MPS directory " + dir.string() +
                                             (S_ISLNK(st.st_mode)    ? " is a symbolic link"
                                              : !S_ISDIR(st.st_mode) ? " is not a directory"
                                                                     : " belongs to uid " + std::to_string(st.st_uid)) +
                                             ": remove it, or give the worker another work dir");
    }
    if (::chmod(dir.c_str(), mode) != 0) {
        return make_error(ErrorCode::io, "cannot set the mode of " + dir.string() + ": " + std::strerror(errno));
    }
    return {};
}

// The first directory on the way to `dir` that other users cannot pass through, if any.
std::optional<fs::path> closed_to_others(const fs::path& dir) {
    for (fs::path p = dir; !p.empty() && p != p.root_path(); p = p.parent_path()) {
        struct stat st {};
        if (::stat(p.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
            return p;
        }
    }
    return std::nullopt;
}

class RealMpsControl final : public MpsControl {
public:
    RealMpsControl(milliseconds timeout, milliseconds stop_wait) : m_timeout(timeout), m_stop_wait(stop_wait) {}
    ~RealMpsControl() override {
        util::MutexLock lock(m_mu);
        if (auto st = stop_locked(); !st) {
            spdlog::warn("{}", st.error().message);
        }
    }
    RealMpsControl(const RealMpsControl&) = delete;
    RealMpsControl& operator=(const RealMpsControl&) = delete;

    Status start(const MpsDirs& dirs, const std::vector<std::string>& gpu_uuids) override {
        util::MutexLock lock(m_mu);
        if (m_started && m_dirs.pipe == dirs.pipe && answers()) {
            return {};
        }
        if (gpu_uuids.empty()) {
            return make_error(ErrorCode::invalid_input, "the MPS control daemon needs at least one GPU to serve");
        }
        if (m_started) {
            if (auto st = stop_locked(); !st) {
                return st;
            }
        }
        if (auto st = make_dir(dirs.pipe, 0755); !st) {
            return st;
        }
        if (auto st = make_dir(dirs.log, 0700); !st) {
            return st;
        }
        // Only a root worker's jobs run as another user (65534 in its containers).
        if (auto closed = closed_to_others(dirs.pipe); closed && ::geteuid() == 0) {
            spdlog::warn("MPS: other users cannot pass through {} on the way to the pipe directory {}: container "
                         "jobs, which run as another user than the worker, will not reach the MPS server",
                         closed->string(), dirs.pipe.string());
        }
        m_dirs = dirs;
        m_gpus = gpu_uuids;
        if (answers()) {
            m_started = true;
            m_pid = read_pid();
            spdlog::info("MPS: adopted the control daemon already answering on {} (pid {})", dirs.pipe.string(),
                         m_pid ? std::to_string(*m_pid) : "unknown");
            return {};
        }
        auto launched = launch();
        if (!launched) {
            std::error_code ec;
            fs::remove(dirs.pipe, ec); // only when empty: nothing of a daemon's is removed here
        }
        return launched;
    }

    bool running() override {
        util::MutexLock lock(m_mu);
        return m_started && answers();
    }

    Status stop() override {
        util::MutexLock lock(m_mu);
        return stop_locked();
    }

private:
    // One bounded call of the control program with the daemon's environment.
    Result<BoundedRun> control(const std::vector<std::string>& args, const std::string& input) REQUIRES(m_mu) {
        const auto program = boost::process::search_path(k_mps_control_program);
        if (program.empty()) {
            return make_error(ErrorCode::io, std::string(k_mps_control_program) +
                                                 " is not on PATH: install the NVIDIA driver's compute utilities, "
                                                 "or run the worker without --mps");
        }
        std::string visible;
        for (const auto& uuid : m_gpus) {
            visible += (visible.empty() ? "" : ",") + uuid;
        }
        BoundedRunOptions options{.env = {{"CUDA_MPS_PIPE_DIRECTORY", m_dirs.pipe.string()},
                                          {"CUDA_MPS_LOG_DIRECTORY", m_dirs.log.string()},
                                          {"CUDA_VISIBLE_DEVICES", visible}},
                                  .drop_prefixes = {"GPUPOOL_"}, // its servers run as the jobs' user
                                  .input = input,
                                  .timeout = m_timeout};
        return run_bounded(program.string(), args, options);
    }

    bool answers() REQUIRES(m_mu) {
        auto run = control({}, "get_server_list\n");
        return run && !run->timed_out && run->exit_code == 0;
    }

    std::optional<pid_t> read_pid() REQUIRES(m_mu) {
        const std::string text = first_line(m_dirs.pipe / k_pid_file);
        pid_t pid = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), pid);
        if (ec != std::errc() || end != text.data() + text.size() || pid <= 1) {
            return std::nullopt;
        }
        return pid;
    }

    // `nvidia-cuda-mps-control -d`, then waits until the daemon answers.
    Status launch() REQUIRES(m_mu) {
        const std::string what = std::string(k_mps_control_program) + " -d";
        auto run = control({"-d"}, "");
        if (!run) {
            return run.error();
        }
        if (run->timed_out) {
            return make_error(ErrorCode::io, what + " did not return within " + std::to_string(m_timeout.count()) +
                                                 " ms" + said(*run));
        }
        if (run->exit_code != 0) {
            return make_error(ErrorCode::io,
                              what + " exited with status " + std::to_string(run->exit_code) + said(*run));
        }
        m_started = true;
        if (!wait_until([&]() REQUIRES(m_mu) { return answers(); }, m_timeout)) {
            m_pid = read_pid();
            (void)stop_locked();
            return make_error(ErrorCode::io, what + " started, but the daemon did not answer on " +
                                                 m_dirs.pipe.string() + " within " + std::to_string(m_timeout.count()) +
                                                 " ms (see " + (m_dirs.log / "control.log").string() + ")");
        }
        m_pid = read_pid();
        spdlog::info("MPS: started the control daemon (pid {}) for {} GPU(s); pipes in {}",
                     m_pid ? std::to_string(*m_pid) : "unknown", m_gpus.size(), m_dirs.pipe.string());
        return {};
    }

    // Gone: its pid (when known) no longer runs an MPS program, else it no longer answers.
    bool gone() REQUIRES(m_mu) {
        if (!m_pid) {
            m_pid = read_pid();
        }
        return m_pid ? !mps_process_alive(*m_pid) : !answers();
    }

    Status stop_locked() REQUIRES(m_mu) {
        if (!m_started) {
            return {};
        }
        auto quit = control({}, "quit\n");
        if (!quit || quit->timed_out || quit->exit_code != 0) {
            spdlog::warn("MPS: `quit` to the control daemon {}",
                         !quit             ? quit.error().message
                         : quit->timed_out ? "did not return in time"
                                           : "exited with status " + std::to_string(quit->exit_code) + said(*quit));
        }
        auto is_gone = [&]() REQUIRES(m_mu) { return gone(); };
        if (!wait_until(is_gone, m_stop_wait) && m_pid) {
            spdlog::warn("MPS: the control daemon (pid {}) did not quit within {} ms; killing it", *m_pid,
                         m_stop_wait.count());
            ::kill(*m_pid, SIGKILL);
            if (wait_until(is_gone, k_kill_wait)) {
                std::error_code ec;
                fs::remove(m_dirs.pipe / k_pid_file, ec); // it cannot remove it itself any more
            }
        }
        if (!gone()) {
            return make_error(ErrorCode::io, "the MPS control daemon on " + m_dirs.pipe.string() +
                                                 (m_pid ? " (pid " + std::to_string(*m_pid) + ") would not stop"
                                                        : " still answers and wrote no pid to kill"));
        }
        m_started = false;
        m_pid.reset();
        std::error_code ec;
        fs::remove_all(m_dirs.pipe, ec); // its pipes and pid file: nothing answers there any more
        spdlog::info("MPS: the control daemon on {} has stopped", m_dirs.pipe.string());
        return {};
    }

    const milliseconds m_timeout;
    const milliseconds m_stop_wait;
    util::Mutex m_mu;
    MpsDirs m_dirs GUARDED_BY(m_mu);
    std::vector<std::string> m_gpus GUARDED_BY(m_mu);
    bool m_started GUARDED_BY(m_mu) = false;
    std::optional<pid_t> m_pid GUARDED_BY(m_mu);
};

} // namespace

MpsDirs mps_dirs(const fs::path& work_dir, uid_t euid, const fs::path& run_root) {
    std::error_code ec;
    fs::path abs = fs::absolute(work_dir, ec).lexically_normal();
    if (ec) {
        abs = work_dir.lexically_normal();
    }
    if (euid != 0) {
        return {abs / "mps" / "pipe", abs / "mps" / "log"};
    }
    std::string text = abs.string();
    while (text.size() > 1 && text.back() == '/') {
        text.pop_back();
    }
    std::uint64_t hash = 14695981039346656037ULL; // FNV-1a, 64 bits: stable across builds and machines
    for (unsigned char c : text) {
        hash = (hash ^ c) * 1099511628211ULL;
    }
    char key[17];
    std::snprintf(key, sizeof key, "%016llx", static_cast<unsigned long long>(hash));
    return {run_root / (std::string("gpupool-mps-") + key), abs / "mps" / "log"};
}

const char* to_string(MpsCompute c) {
    switch (c) {
    case MpsCompute::throughput:
        return "throughput";
    case MpsCompute::isolate:
        return "isolate";
    }
    return "?";
}

Result<MpsCompute> parse_mps_compute(std::string_view text) {
    for (auto c : {MpsCompute::throughput, MpsCompute::isolate}) {
        if (text == to_string(c)) {
            return c;
        }
    }
    return make_error(ErrorCode::invalid_input,
                      "expected `throughput` (MPS clients may use the whole GPU's compute, memory capped) or "
                      "`isolate` (each client's compute capped at its share), got `" +
                          std::string(text) + "`");
}

bool mps_available() {
    if (boost::process::search_path(k_mps_control_program).empty()) {
        return false;
    }
    auto gpus = NvidiaSmiProbe(std::chrono::seconds(10)).list();
    return gpus && !gpus->empty();
}

std::unique_ptr<MpsControl> make_mps_control(milliseconds timeout, milliseconds stop_wait) {
    return std::make_unique<RealMpsControl>(timeout, stop_wait);
}

Result<std::unique_ptr<MpsControl>> start_worker_mps(const std::vector<std::string>& gpu_uuids, bool runtime_shares_ipc,
                                                     const std::string& runtime_name,
                                                     const std::filesystem::path& work_dir) {
    if (gpu_uuids.empty()) {
        return make_error(ErrorCode::invalid_input, "--mps: this machine shares no NVIDIA GPU");
    }
    if (!runtime_shares_ipc) {
        return make_error(ErrorCode::invalid_input, "--mps: the " + runtime_name +
                                                        " runtime cannot give jobs the host's IPC namespace, "
                                                        "which MPS clients need");
    }
    auto mps = make_mps_control();
    if (auto st = mps->start(mps_dirs(work_dir), gpu_uuids); !st) {
        return make_error(st.error().code, "--mps: " + st.error().message);
    }
    return mps;
}

std::map<std::string, std::string> mps_client_env(std::int64_t gpu_milli, std::int64_t limit_mib, int device_seen_as,
                                                  const std::string& pipe_dir_seen, MpsCompute compute) {
    std::map<std::string, std::string> env{{"CUDA_MPS_PIPE_DIRECTORY", pipe_dir_seen}};
    if (limit_mib > 0) {
        env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] =
            std::to_string(device_seen_as) + "=" + std::to_string(limit_mib) + "M";
    }
    if (compute != MpsCompute::isolate) {
        return env; // throughput: the server's own percentage (100): idle SMs are any client's
    }
    // milli-GPU to percent, rounded up: 333 -> 34.
    const std::int64_t percent = std::clamp<std::int64_t>((gpu_milli + 9) / 10, 1, 100);
    env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(percent);
    return env;
}

} // namespace gpupool::worker

#include "cmd/worker.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "cmd/secret_file.hpp"
#include "cmd/worker_install.hpp"
#include "core/client/api_client.hpp"
#include "core/config/client_config.hpp"
#include "core/credits/money.hpp"
#include "core/net/url.hpp"
#include "core/resources/quantity.hpp"
#include "worker/agent/agent.hpp"
#include "worker/gpu/gpu_probe.hpp"
#include "worker/gpu/mps_daemon.hpp"
#include "worker/runtime/runtime_registry.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <thread>
#include <tuple>

namespace gpupool::cmd {

namespace {

namespace fs = std::filesystem;

void print_inventory(const GlobalOptions& global, const std::vector<worker::GpuInfo>& gpus,
                     const std::string& runtime) {
    if (global.json) {
        nlohmann::json g = nlohmann::json::array();
        for (const auto& x : gpus) {
            g.push_back({{"index", x.index}, {"model", x.model}, {"memory_mib", x.memory_mib}, {"uuid", x.uuid}});
        }
        std::cout << nlohmann::json{{"gpus", g}, {"runtime", runtime}, {"sharing", false}}.dump() << std::endl;
        return;
    }
    std::cout << "This machine would offer " << gpus.size() << " GPU(s) to the pool"
              << (gpus.empty() ? " (no NVIDIA driver found: CPU-only jobs)" : "") << ":\n";
    for (const auto& x : gpus) {
        std::cout << "  [" << x.index << "] " << x.name << "  " << x.memory_mib << " MiB  " << x.uuid << "\n";
    }
    std::cout << "Jobs would run with the `" << runtime << "` runtime.\n"
              << "Nothing is shared yet: run `gpupool worker --share --coordinator URL --token ENROLL_TOKEN` to join "
                 "the pool.\n";
}

std::string expand_home(const std::string& path) {
    const char* home = std::getenv("HOME");
    return path.starts_with("~/") && home != nullptr ? std::string(home) + path.substr(1) : path;
}

// The [pool] settings of worker.toml where no flag gave them.
void apply_pool_settings(const worker::PoolSettings& pool, const GlobalOptions& global, WorkerCmdOptions& o,
                         config::ClientOverrides& ov) {
    const auto unset = [&](const char* flag) { return o.given.count(flag) == 0; };
    if (!ov.url && pool.coordinator) {
        ov.url = *pool.coordinator;
    }
    if (!global.token && !global.token_file && pool.token_file) {
        ov.token_file = expand_home(*pool.token_file);
    }
    if (!global.ca_cert && pool.ca_cert) {
        ov.ca_cert = expand_home(*pool.ca_cert);
    }
    for (auto [flag, slot, value] :
         {std::tuple{"--name", &o.name, pool.name}, std::tuple{"--work-dir", &o.work_dir, pool.work_dir},
          std::tuple{"--cache-dir", &o.cache_dir, pool.cache_dir}, std::tuple{"--runtime", &o.runtime, pool.runtime}}) {
        if (unset(flag) && value) {
            *slot = std::string(flag) == "--name" || std::string(flag) == "--runtime" ? *value : expand_home(*value);
        }
    }
    if (unset("--unsafe-process-runtime") && pool.unsafe_process_runtime) {
        o.unsafe_process_runtime = *pool.unsafe_process_runtime;
    }
    if (unset("--mps") && pool.mps) {
        o.mps = *pool.mps;
    }
    if (unset("--mps-compute") && pool.mps_compute) {
        o.mps_compute = worker::to_string(*pool.mps_compute);
    }
    if (unset("--model-cache-max") && pool.model_cache_max_mib) {
        o.model_cache_max = std::to_string(*pool.model_cache_max_mib) + "MiB";
    }
    if (unset("--hf-token-file") && pool.hf_token_file) {
        o.hf_token_file = expand_home(*pool.hf_token_file);
    }
    if (unset("--hf-endpoint") && pool.hf_endpoint) {
        o.hf_endpoint = *pool.hf_endpoint;
    }
}

// --mps, --mps-compute, --model-cache-max, --hf-token-file and --hf-endpoint (or worker.toml's) into the
// agent's options.
Status model_cache_options(const WorkerCmdOptions& o, worker::AgentOptions& ao) {
    ao.mps = o.mps;
    if (!o.mps_compute.empty()) {
        auto compute = worker::parse_mps_compute(o.mps_compute);
        if (!compute) {
            return make_error(ErrorCode::invalid_input, compute.error().message, "--mps-compute");
        }
        ao.mps_compute = *compute;
    }
    if (!o.model_cache_max.empty()) {
        auto mib = resources::parse_memory_mib(o.model_cache_max);
        if (!mib || *mib <= 0) {
            return make_error(ErrorCode::invalid_input,
                              "expected a size like \"200GiB\", got `" + o.model_cache_max + "`", "--model-cache-max");
        }
        ao.model_cache_max_bytes = *mib * 1024 * 1024;
    }
    if (!o.hf_token_file.empty()) {
        auto token = read_secret_file(o.hf_token_file, "--hf-token-file");
        if (!token) {
            return token.error();
        }
        ao.hub_token = *token;
    }
    if (!o.hf_endpoint.empty() &&
        (!net::is_http_url_list(o.hf_endpoint) || o.hf_endpoint.find(',') != std::string::npos)) {
        return make_error(ErrorCode::invalid_input, "expected an http:// or https:// URL", "--hf-endpoint");
    }
    ao.hub_endpoint = o.hf_endpoint;
    return {};
}

// The [share] settings the flags give (they win over the file, at start and on every reload).
worker::ShareSettings share_flags(const WorkerCmdOptions& o, std::int64_t drain_s) {
    worker::ShareSettings f;
    if (o.given.count("--slots")) {
        f.max_jobs = o.slots;
    }
    if (o.given.count("--cpus-milli") && o.cpu_milli > 0) {
        f.cpu_milli = o.cpu_milli;
    }
    if (o.given.count("--memory-mib") && o.memory_mib > 0) {
        f.memory_mib = o.memory_mib;
    }
    if (o.given.count("--drain-grace")) {
        f.drain_grace_s = drain_s;
    }
    return f;
}

// `gpupool worker` without --share: what this machine would offer, and nothing joins.
int print_offer(const GlobalOptions& global, worker::GpuProbe& probe, const std::string& runtime) {
    auto gpus = probe.list();
    if (!gpus) {
        report_error(global, gpus.error());
        return k_exit_failed;
    }
    print_inventory(global, *gpus, runtime);
    return k_exit_ok;
}

// A runtime that isolates nothing shares this machine only when the owner says so.
Status check_isolation(const WorkerCmdOptions& o) {
    const worker::RuntimeKind* kind = worker::find_runtime_kind(o.runtime);
    if (kind != nullptr && !kind->isolates && !o.unsafe_process_runtime) {
        return make_error(ErrorCode::invalid_input,
                          "the process runtime isolates nothing (jobs run as you, with your files); refusing to "
                          "share this machine with it. Use --runtime podman or docker, or add "
                          "--unsafe-process-runtime if every job comes from people you trust",
                          "--runtime");
    }
    return {};
}

// --drain-grace, --reclaim-grace and --reclaim-quiet, in seconds.
struct Graces {
    std::int64_t drain_s = 0;
    std::int64_t reclaim_s = 0;
    std::int64_t reclaim_quiet_s = 0;
};

Result<Graces> parse_graces(const WorkerCmdOptions& o) {
    Graces g;
    for (auto [flag, text, slot] : {std::tuple{"--drain-grace", &o.drain_grace, &g.drain_s},
                                    std::tuple{"--reclaim-grace", &o.reclaim_grace, &g.reclaim_s},
                                    std::tuple{"--reclaim-quiet", &o.reclaim_quiet, &g.reclaim_quiet_s}}) {
        auto d = resources::parse_duration_s(*text);
        if (!d) {
            Error e = d.error();
            e.field = flag;
            return e;
        }
        *slot = *d;
    }
    return g;
}

// The agent's options from the flags, worker.toml and the client config (which already holds the
// coordinator's URL, the token and the CA). The first start needs an enrollment token; later ones
// reuse the identity in the work dir's worker.json.
Result<worker::AgentOptions> agent_options(const WorkerCmdOptions& o, const config::ClientConfig& cfg,
                                           const std::optional<worker::OwnerConfig>& owner_file, const Graces& graces,
                                           const fs::path& work_dir) {
    worker::AgentOptions ao;
    ao.work_dir = work_dir;
    ao.coordinator_url = cfg.url;
    ao.token = cfg.token;
    ao.ca_cert = cfg.ca_cert;
    ao.name = o.name;
    ao.cache_dir = o.cache_dir;
    if (auto st = model_cache_options(o, ao); !st) {
        return st.error();
    }
    ao.slots = o.slots;
    ao.cpu_milli = o.cpu_milli;
    ao.memory_mib = o.memory_mib;
    ao.share_flags = share_flags(o, graces.drain_s);
    ao.share = owner_file ? worker::merge(ao.share_flags, owner_file->share) : ao.share_flags;
    ao.config_file = owner_file ? fs::path(owner_file->file) : fs::path();
    ao.drain_grace = std::chrono::seconds(ao.share.drain_grace_s.value_or(graces.drain_s));
    ao.reclaim_grace = std::chrono::seconds(graces.reclaim_s);
    ao.reclaim_quiet = std::chrono::seconds(graces.reclaim_quiet_s);
    ao.heartbeat = std::chrono::milliseconds(o.heartbeat_ms);
    ao.poll_wait = std::chrono::milliseconds(o.poll_wait_ms);
    ao.stop_grace = std::chrono::milliseconds(o.stop_grace_ms);
    if (auto stored = worker::read_stored_identity(ao.work_dir);
        ao.token.empty() && !(stored && worker::same_pool(stored->coordinator, ao.coordinator_url))) {
        return make_error(ErrorCode::invalid_input,
                          "no token: the first start registers with an enrollment token (from `gpupool admin enroll "
                          "TEAM`): --token-file FILE, or GPUPOOL_TOKEN, or --token",
                          "--token");
    }
    return ao;
}

// Blocked in every thread and waited for by answer_signals: SIGINT and SIGTERM, SIGHUP (re-read
// worker.toml) and SIGUSR2 (our own wake-up for the signal thread).
sigset_t block_worker_signals() {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGUSR2);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    return signals;
}

// The signal thread. First SIGTERM/SIGINT drains (running jobs may finish within --drain-grace); a
// second one stops the running jobs now and hands them back; a third leaves at once (results stay
// spooled). SIGHUP re-reads worker.toml at any time; SIGUSR2 ends the thread.
void answer_signals(worker::Agent& agent, const sigset_t& signals) {
    int sig = 0;
    const auto next = [&] {
        while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) {
            agent.reload(); // the outcome is told as an event
        }
    };
    next();
    if (sig == SIGUSR2) {
        return;
    }
    spdlog::warn("signal {}: draining: running jobs may finish (send it again to stop them now)", sig);
    agent.drain();
    next();
    if (sig == SIGUSR2) {
        return;
    }
    spdlog::warn("signal {}: stopping the running jobs now and handing them back to the pool (again to leave "
                 "at once)",
                 sig);
    agent.drain_now();
    next();
    if (sig != SIGUSR2) {
        spdlog::warn("signal {}: leaving now; undelivered results stay spooled for the next start", sig);
        agent.stop();
    }
}

// The owner's view, at any log level: what is offered, then one line per job start and end (a
// JSON line each with --json).
std::function<void(const std::string&)> owner_events(bool json_out) {
    return [json_out](const std::string& line) {
        const auto now =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        if (json_out) {
            std::cout << nlohmann::json{{"at", now}, {"event", line}}.dump() << std::endl;
        } else {
            std::cerr << "gpupool worker: " << format_time(now) << " UTC " << printable(line) << std::endl;
        }
    };
}

} // namespace

Result<std::optional<worker::OwnerConfig>> load_worker_toml(const WorkerCmdOptions& o) {
    fs::path path = o.config.empty() ? worker::default_owner_config_path() : fs::path(o.config);
    std::error_code ec;
    if (o.config.empty() && !fs::exists(path, ec)) {
        return std::optional<worker::OwnerConfig>();
    }
    auto cfg = worker::load_owner_config(path);
    if (!cfg) {
        return cfg.error();
    }
    return std::optional<worker::OwnerConfig>(std::move(*cfg));
}

// Absolute, so that what the worker hands its jobs (GPUPOOL_OUTPUT_DIR under the process runtime)
// does not depend on their working directory.
fs::path worker_work_dir(const WorkerCmdOptions& o, const std::optional<worker::OwnerConfig>& cfg) {
    fs::path dir = default_data_dir() + "/worker";
    if (!o.work_dir.empty()) {
        dir = o.work_dir;
    } else if (cfg && cfg->pool.work_dir) {
        dir = expand_home(*cfg->pool.work_dir);
    }
    std::error_code ec;
    fs::path abs = fs::absolute(dir, ec);
    return ec ? dir : abs;
}

// The steps: the settings (flags, then worker.toml, then the client config); without --share, the
// offer and nothing more; the checks and the agent's options; then the agent runs until it leaves,
// with a thread that answers signals.
int run_worker(const GlobalOptions& global, WorkerCmdOptions o) {
    config::ClientOverrides ov = overrides(global);
    if (!o.coordinator.empty()) {
        ov.url = o.coordinator;
    }
    auto owner_file = load_worker_toml(o);
    if (!owner_file) {
        report_error(global, owner_file.error());
        return k_exit_usage;
    }
    if (*owner_file) {
        apply_pool_settings((*owner_file)->pool, global, o, ov);
    }
    worker::NvidiaSmiProbe probe;
    if (!o.share) {
        return print_offer(global, probe, o.runtime);
    }
    if (auto st = check_isolation(o); !st) {
        report_error(global, st.error());
        return k_exit_usage;
    }
    auto cfg = config::load_client_config(ov);
    if (!cfg) {
        report_error(global, cfg.error());
        return k_exit_usage;
    }
    auto graces = parse_graces(o);
    if (!graces) {
        report_error(global, graces.error());
        return k_exit_usage;
    }
    const fs::path work_dir = worker_work_dir(o, *owner_file);
    auto runtime = worker::make_runtime(o.runtime, o.runtime_args, o.container_args, work_dir / "process-runtime");
    if (!runtime) {
        report_error(global, runtime.error());
        return k_exit_usage;
    }
    auto ao = agent_options(o, *cfg, *owner_file, *graces, work_dir);
    if (!ao) {
        report_error(global, ao.error());
        return k_exit_usage;
    }
    const sigset_t signals = block_worker_signals();
    ao->on_event = owner_events(global.json);
    worker::Agent agent(*ao, **runtime, probe);
    std::thread waiter([&] { answer_signals(agent, signals); });
    if (!global.json) {
        std::cerr << "gpupool worker: joining " << ao->coordinator_url << " (runtime " << (*runtime)->name()
                  << ", work dir " << ao->work_dir.string() << ")" << std::endl;
    }
    auto st = agent.run();
    // Wake the signal thread if it is still waiting.
    pthread_kill(waiter.native_handle(), SIGUSR2);
    waiter.join();
    if (!st) {
        report_error(global, st.error());
        return k_exit_failed;
    }
    return k_exit_ok;
}

void register_worker(Cli& cli) {
    auto o = std::make_shared<WorkerCmdOptions>();
    CLI::App* sub = add_command(cli, "worker", "Share this machine's GPU with the pool (outbound connections only)");
    sub->add_flag("--share", o->share, "Join the pool and run its jobs (without it: show what would be shared)");
    sub->add_option("--config", o->config,
                    "The owner's terms, worker.toml (default ~/.config/gpupool/worker.toml when it exists; flags win)");
    sub->add_option("--coordinator", o->coordinator, "Coordinator URL (same as --url)");
    sub->add_option("--runtime", o->runtime, "How jobs run: podman, docker, or process (no isolation)")
        ->check(CLI::IsMember(worker::runtime_names()))
        ->capture_default_str();
    sub->add_flag("--unsafe-process-runtime", o->unsafe_process_runtime,
                  "Allow --runtime process with --share (jobs run unisolated, as this user)");
    sub->add_option("--work-dir", o->work_dir,
                    "Spool: job logs, outputs and state (default ~/.local/share/gpupool/worker)");
    sub->add_option("--cache-dir", o->cache_dir,
                    "Caches (default WORK_DIR/cache): models/ (the model cache this worker fills, read-only to jobs at "
                    "/cache) and teams/ (each team's own writable cache, at /team-cache)");
    sub->add_option("--model-cache-max", o->model_cache_max,
                    "Evict least recently used models past this size, e.g. 200GiB (default: no cap)");
    sub->add_option("--hf-token-file", o->hf_token_file, "A Hugging Face token (one line) for gated models");
    sub->add_option("--hf-endpoint", o->hf_endpoint,
                    "Where models come from (default $HF_ENDPOINT, else https://huggingface.co)");
    sub->add_flag("--mps", o->mps,
                  "Run an MPS control daemon for the shared GPUs: fractional jobs become its clients, their GPU "
                  "memory capped by the driver (containers then share the host's IPC namespace)");
    sub->add_option("--mps-compute", o->mps_compute,
                    "With --mps, the GPU's compute an MPS client may use: throughput (default: any SM its neighbours "
                    "leave idle) or isolate (capped at its share)")
        ->check(CLI::IsMember({"throughput", "isolate"}));
    sub->add_option("--name", o->name, "Name shown to the pool (default: host name)");
    sub->add_option("--slots", o->slots, "Ask for no new work while this many jobs run (0: no cap)");
    sub->add_option("--runtime-arg", o->runtime_args,
                    "Extra global flag for podman/docker (repeatable), e.g. -H=unix:///…");
    sub->add_option("--container-arg", o->container_args,
                    "Extra flag for every job's container (repeatable), e.g. --container-arg=--network=none");
    sub->add_option("--drain-grace", o->drain_grace, "On SIGTERM, how long running jobs may finish")
        ->capture_default_str();
    sub->add_option("--reclaim-grace", o->reclaim_grace,
                    "When you use a shared GPU yourself, how long the pool's jobs on it get to stop")
        ->capture_default_str();
    sub->add_option("--reclaim-quiet", o->reclaim_quiet,
                    "How long a GPU you used must be free of your processes before it is shared again")
        ->capture_default_str();
    sub->add_option("--cpus-milli", o->cpu_milli, "CPU to offer, in milli-CPUs (default: all cores)");
    sub->add_option("--memory-mib", o->memory_mib, "Memory to offer, in MiB (default: all)");
    sub->add_option("--heartbeat-ms", o->heartbeat_ms, "Heartbeat period at most (lease/3 when shorter)")
        ->capture_default_str();
    sub->add_option("--poll-wait-ms", o->poll_wait_ms, "Long-poll wait")->capture_default_str();
    sub->add_option("--stop-grace-ms", o->stop_grace_ms, "SIGTERM to SIGKILL for cancelled or preempted jobs")
        ->capture_default_str();
    CLI::App* status = sub->add_subcommand(
        "status", "Whether this machine shares now, what runs on each GPU, and what it has earned (no token needed)");
    status->fallthrough(); // `worker status --work-dir D`
    status->callback([&cli, o] { cli.exit_code = run_worker_status(cli.global, *o); });
    CLI::App* pause = sub->add_subcommand(
        "pause", "Stop taking new jobs on this machine (running ones go on unless --now); kept across restarts");
    pause->add_option("--why", o->pause_why, "A note for yourself, shown by `worker status`");
    pause->add_option("--for", o->pause_for, "Share again by itself after this long (e.g. 2h)");
    pause->add_flag("--now", o->pause_now,
                    "Also stop the running jobs now and hand them back to the pool (not charged)");
    pause->fallthrough();
    pause->callback([&cli, o] { cli.exit_code = run_worker_pause(cli.global, *o, true); });
    CLI::App* resume = sub->add_subcommand("resume", "Take jobs again after `worker pause`");
    resume->fallthrough();
    resume->callback([&cli, o] { cli.exit_code = run_worker_pause(cli.global, *o, false); });
    CLI::App* reload = sub->add_subcommand("reload", "Make the running worker re-read worker.toml (as SIGHUP does)");
    reload->fallthrough();
    reload->callback([&cli, o] { cli.exit_code = run_worker_reload(cli.global, *o); });
    add_help_footer(sub,
                    "gpupool worker                                     # what this machine would offer\n"
                    "gpupool worker --share --coordinator URL --token-file enroll.token\n"
                    "gpupool worker --share --config ~/.config/gpupool/worker.toml\n"
                    "gpupool worker pause --for 3h --why \"training\"      # or: gpupool worker resume\n"
                    "gpupool worker status",
                    "docs/worker.md (every option, the work dir, what the owner sees)", Reach::coordinator);
    add_help_footer(status, "gpupool worker status\ngpupool worker status --work-dir /srv/gpupool", "docs/worker.md",
                    Reach::local);
    add_help_footer(pause,
                    "gpupool worker pause --why \"my own training tonight\"\ngpupool worker pause --for 2h --now",
                    "docs/worker.md", Reach::local);
    add_help_footer(reload, "gpupool worker reload", "docs/worker.md", Reach::local);
    add_help_footer(resume, "gpupool worker resume", "docs/worker.md", Reach::local);
    register_worker_install(cli, sub);
    sub->callback([&cli, o, sub] {
        for (const char* flag : {"--runtime", "--work-dir", "--cache-dir", "--name", "--slots", "--drain-grace",
                                 "--cpus-milli", "--memory-mib", "--unsafe-process-runtime", "--mps", "--mps-compute",
                                 "--model-cache-max", "--hf-token-file", "--hf-endpoint"}) {
            if (sub->count(flag) > 0) {
                o->given.insert(flag);
            }
        }
        if (sub->get_subcommands().empty()) { // not status, pause, resume, reload, install, uninstall
            cli.exit_code = run_worker(cli.global, *o);
        }
    });
}

} // namespace gpupool::cmd

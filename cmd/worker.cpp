#include "cmd/worker.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "cmd/worker_install.hpp"
#include "core/client/api_client.hpp"
#include "core/config/client_config.hpp"
#include "core/credits/money.hpp"
#include "core/resources/quantity.hpp"
#include "worker/agent/agent.hpp"
#include "worker/gpu/gpu_probe.hpp"
#include "worker/runtime/runtime_registry.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

namespace gpupool::cmd {

namespace {

namespace fs = std::filesystem;

void print_inventory(const GlobalOptions& global, const std::vector<worker::GpuInfo>& gpus, const std::string& runtime) {
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

} // namespace

int run_worker(const GlobalOptions& global, WorkerCmdOptions o) {
    config::ClientOverrides ov = overrides(global);
    if (!o.coordinator.empty()) {
        ov.url = o.coordinator;
    }
    worker::NvidiaSmiProbe probe;
    if (!o.share) {
        auto gpus = probe.list();
        if (!gpus) {
            report_error(global, gpus.error());
            return k_exit_failed;
        }
        print_inventory(global, *gpus, o.runtime);
        return k_exit_ok;
    }
    const worker::RuntimeKind* kind = worker::find_runtime_kind(o.runtime);
    if (kind != nullptr && !kind->isolates && !o.unsafe_process_runtime) {
        report_error(global, make_error(ErrorCode::invalid_input,
                                        "the process runtime isolates nothing (jobs run as you, with your files); "
                                        "refusing to share this machine with it. Use --runtime podman or docker, or "
                                        "add --unsafe-process-runtime if every job comes from people you trust",
                                        "--runtime"));
        return k_exit_usage;
    }
    auto cfg = config::load_client_config(ov);
    if (!cfg) {
        report_error(global, cfg.error());
        return k_exit_usage;
    }
    auto drain = resources::parse_duration_s(o.drain_grace);
    if (!drain) {
        Error e = drain.error();
        e.field = "--drain-grace";
        report_error(global, e);
        return k_exit_usage;
    }
    worker::AgentOptions ao;
    ao.work_dir = o.work_dir.empty() ? default_data_dir() + "/worker" : o.work_dir;
    auto runtime = worker::make_runtime(o.runtime, o.runtime_args, o.container_args, ao.work_dir / "process-runtime");
    if (!runtime) {
        report_error(global, runtime.error());
        return k_exit_usage;
    }
    ao.coordinator_url = cfg->url;
    ao.token = cfg->token;
    ao.ca_cert = cfg->ca_cert;
    ao.name = o.name;
    ao.cache_dir = o.cache_dir;
    ao.slots = o.slots;
    ao.cpu_milli = o.cpu_milli;
    ao.memory_mib = o.memory_mib;
    ao.drain_grace = std::chrono::seconds(*drain);
    ao.heartbeat = std::chrono::milliseconds(o.heartbeat_ms);
    ao.poll_wait = std::chrono::milliseconds(o.poll_wait_ms);
    ao.stop_grace = std::chrono::milliseconds(o.stop_grace_ms);
    if (auto stored = worker::read_stored_identity(ao.work_dir);
        ao.token.empty() && !(stored && stored->coordinator == ao.coordinator_url)) {
        // Later starts reuse the identity in worker.json; only the first needs an enrollment token.
        report_error(global, make_error(ErrorCode::invalid_input,
                                        "no token: the first start registers with an enrollment token (from `gpupool "
                                        "admin enroll TEAM`): --token-file FILE, or GPUPOOL_TOKEN, or --token",
                                        "--token"));
        return k_exit_usage;
    }

    // First SIGTERM/SIGINT drains (running jobs may finish within --drain-grace); a second one stops
    // the running jobs now and hands them back; a third leaves at once (results stay spooled).
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGUSR2); // our own wake-up for the signal thread
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    // The owner's view, at any log level: what is offered, then one line per job start and end.
    ao.on_event = [json_out = global.json](const std::string& line) {
        const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
        if (json_out) {
            std::cout << nlohmann::json{{"at", now}, {"event", line}}.dump() << std::endl;
        } else {
            std::cerr << "gpupool worker: " << format_time(now) << " UTC " << printable(line) << std::endl;
        }
    };
    worker::Agent agent(ao, **runtime, probe);
    std::thread waiter([&] {
        int sig = 0;
        sigwait(&signals, &sig);
        if (sig == SIGUSR2) {
            return;
        }
        spdlog::warn("signal {}: draining: running jobs may finish (send it again to stop them now)", sig);
        agent.drain();
        sigwait(&signals, &sig);
        if (sig == SIGUSR2) {
            return;
        }
        spdlog::warn("signal {}: stopping the running jobs now and handing them back to the pool (again to leave "
                     "at once)", sig);
        agent.drain_now();
        sigwait(&signals, &sig);
        if (sig != SIGUSR2) {
            spdlog::warn("signal {}: leaving now; undelivered results stay spooled for the next start", sig);
            agent.stop();
        }
    });
    if (!global.json) {
        std::cerr << "gpupool worker: joining " << ao.coordinator_url << " (runtime " << (*runtime)->name()
                  << ", work dir " << ao.work_dir.string() << ")" << std::endl;
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

// `gpupool worker status`: the owner's view with the identity the machine already has (no
// second token): which pool and worker this is, what its team has earned, what is spooled.
int run_worker_status(const GlobalOptions& global, const WorkerCmdOptions& o) {
    const fs::path work = o.work_dir.empty() ? fs::path(default_data_dir() + "/worker") : fs::path(o.work_dir);
    const auto id = worker::read_stored_identity(work);
    if (!id) {
        report_error(global, make_error(ErrorCode::not_found,
                                        "no worker identity in " + (work / "worker.json").string() +
                                            ": this machine has not joined a pool with this work dir "
                                            "(`gpupool worker --share`; or pass --work-dir)",
                                        "--work-dir"));
        return k_exit_failed;
    }
    const std::string& coordinator = id->coordinator;
    if (!coordinator.starts_with("http://") && !coordinator.starts_with("https://")) {
        report_error(global, make_error(ErrorCode::invalid_input,
                                        "this work dir belongs to the local pool of `gpupool run` (" + coordinator +
                                            "), which has no earnings",
                                        "--work-dir"));
        return k_exit_failed;
    }
    std::size_t spooled = 0;
    std::error_code ec;
    for (auto it = fs::directory_iterator(work / "attempts", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
        ++spooled;
    }
    config::ClientConfig cfg;
    cfg.url = coordinator;
    cfg.url_source = (work / "worker.json").string();
    cfg.token = id->token;
    if (global.ca_cert) {
        cfg.ca_cert = *global.ca_cert;
    }
    client::ApiClient api(cfg);
    auto credits = api.get("/v1/credits?limit=" + std::to_string(o.status_limit));
    if (!credits) {
        report_error(global, credits.error());
        return k_exit_failed;
    }
    if (global.json) {
        const auto paused = worker::paused_since(work);
        std::cout << nlohmann::json{{"coordinator", coordinator},
                                    {"worker_id", id->worker_id},
                                    {"paused", paused ? nlohmann::json(*paused) : nlohmann::json()},
                                    {"spooled_attempts", spooled},
                                    {"credits", *credits}}
                         .dump(2)
                  << '\n';
        return k_exit_ok;
    }
    const auto& c = *credits;
    const std::string team_account = "team:" + std::to_string(c["team_id"].get<std::int64_t>());
    const std::string settling_account = "settling:" + std::to_string(c["team_id"].get<std::int64_t>());
    std::cout << "worker " << id->worker_id << " of team " << printable(c["team"]) << " on "
              << coordinator << " (work dir " << work.string() << ", " << spooled << " attempt(s) spooled)\n";
    const auto paused = worker::paused_since(work);
    std::cout << "  sharing     "
              << (paused ? "paused since " + printable(*paused) + " (`gpupool worker resume` shares again)"
                         : std::string("on (`gpupool worker pause` stops new jobs)"))
              << '\n';
    std::cout << "  available   " << credits::format_credits(c["balance_micro"].get<std::int64_t>()) << " credits\n";
    std::cout << "  settling    " << credits::format_credits(c.value("settling_micro", std::int64_t{0}))
              << " credits (earned, paid out when the pool's settling period ends)\n";
    std::vector<std::vector<std::string>> rows{{"WHEN (UTC)", "AMOUNT", "WHAT"}};
    for (const auto& e : c["movements"]) {
        const std::string reason = e["reason"].get<std::string>();
        const bool earning = reason == "charge" && (e["credit"] == team_account || e["credit"] == settling_account);
        const bool voided = reason == "refund" && (e["debit"] == team_account || e["debit"] == settling_account);
        if (!earning && !voided && reason != "payout") {
            continue;
        }
        const std::string amount = credits::format_credits(e["amount_micro"].get<std::int64_t>());
        const std::string attempt = e["attempt"].is_number_integer() ? std::to_string(e["attempt"].get<std::int64_t>()) : "?";
        rows.push_back({format_time(e["at"]), earning ? "+" + amount : voided ? "-" + amount : amount,
                        earning   ? "earned for attempt " + attempt + (e["credit"] == settling_account ? " (settling)" : "")
                        : voided  ? "voided: attempt " + attempt + " (" + e["note"].get<std::string>() + ")"
                                  : "paid out for attempt " + attempt});
    }
    if (rows.size() > 1) {
        std::cout << "\nrecent earnings (newest first):\n";
        print_table(rows);
    }
    return k_exit_ok;
}

// `gpupool worker pause|resume`: flips <work_dir>/paused, which the running worker reads before each
// heartbeat (a stopped worker finds it at its next start).
int run_worker_pause(const GlobalOptions& global, const WorkerCmdOptions& o, bool pause) {
    const fs::path work = o.work_dir.empty() ? fs::path(default_data_dir() + "/worker") : fs::path(o.work_dir);
    if (!worker::read_stored_identity(work)) {
        report_error(global, make_error(ErrorCode::not_found,
                                        "no worker identity in " + (work / "worker.json").string() +
                                            ": no worker shares from this work dir (pass --work-dir)",
                                        "--work-dir"));
        return k_exit_failed;
    }
    auto st = pause ? worker::pause_sharing(work, o.pause_why) : worker::resume_sharing(work);
    if (!st) {
        report_error(global, st.error());
        return k_exit_failed;
    }
    if (global.json) {
        std::cout << nlohmann::json{{"paused", pause}, {"work_dir", work.string()}}.dump() << '\n';
    } else {
        std::cout << (pause ? "paused: the worker takes no new jobs from its next heartbeat (seconds); running jobs go "
                              "on. `gpupool worker resume` shares again\n"
                            : "resumed: the worker takes jobs again from its next heartbeat\n");
    }
    return k_exit_ok;
}

void register_worker(Cli& cli) {
    auto o = std::make_shared<WorkerCmdOptions>();
    CLI::App* sub = add_command(cli, "worker", "Share this machine's GPU with the pool (outbound connections only)");
    sub->add_flag("--share", o->share, "Join the pool and run its jobs (without it: show what would be shared)");
    sub->add_option("--coordinator", o->coordinator, "Coordinator URL (same as --url)");
    sub->add_option("--runtime", o->runtime, "How jobs run: podman, docker, or process (no isolation)")
        ->check(CLI::IsMember(worker::runtime_names()))
        ->capture_default_str();
    sub->add_flag("--unsafe-process-runtime", o->unsafe_process_runtime,
                  "Allow --runtime process with --share (jobs run unisolated, as this user)");
    sub->add_option("--work-dir", o->work_dir, "Spool: job logs, outputs and state (default ~/.local/share/gpupool/worker)");
    sub->add_option("--cache-dir", o->cache_dir, "Model cache mounted at /cache (default WORK_DIR/cache)");
    sub->add_option("--name", o->name, "Name shown to the pool (default: host name)");
    sub->add_option("--slots", o->slots, "Ask for no new work while this many jobs run (0: no cap)");
    sub->add_option("--runtime-arg", o->runtime_args, "Extra global flag for podman/docker (repeatable), e.g. -H=unix:///…");
    sub->add_option("--container-arg", o->container_args,
                    "Extra flag for every job's container (repeatable), e.g. --container-arg=--network=none");
    sub->add_option("--drain-grace", o->drain_grace, "On SIGTERM, how long running jobs may finish")->capture_default_str();
    sub->add_option("--cpus-milli", o->cpu_milli, "CPU to offer, in milli-CPUs (default: all cores)");
    sub->add_option("--memory-mib", o->memory_mib, "Memory to offer, in MiB (default: all)");
    sub->add_option("--heartbeat-ms", o->heartbeat_ms, "Heartbeat period at most (lease/3 when shorter)")->capture_default_str();
    sub->add_option("--poll-wait-ms", o->poll_wait_ms, "Long-poll wait")->capture_default_str();
    sub->add_option("--stop-grace-ms", o->stop_grace_ms, "SIGTERM to SIGKILL for cancelled or preempted jobs")
        ->capture_default_str();
    CLI::App* status = sub->add_subcommand(
        "status", "What this machine's worker has earned, with the identity it already has (no token needed)");
    status->add_option("--limit", o->status_limit, "How many recent movements to look through")->capture_default_str();
    status->fallthrough(); // `worker status --work-dir D`
    status->callback([&cli, o] { cli.exit_code = run_worker_status(cli.global, *o); });
    CLI::App* pause = sub->add_subcommand(
        "pause", "Stop taking new jobs on this machine (running ones go on); the worker tells the pool within seconds");
    pause->add_option("--why", o->pause_why, "A note for yourself, shown by `worker status`");
    pause->fallthrough();
    pause->callback([&cli, o] { cli.exit_code = run_worker_pause(cli.global, *o, true); });
    CLI::App* resume = sub->add_subcommand("resume", "Take jobs again after `worker pause`");
    resume->fallthrough();
    resume->callback([&cli, o] { cli.exit_code = run_worker_pause(cli.global, *o, false); });
    add_help_footer(sub,
                    "gpupool worker                                     # what this machine would offer\n"
                    "gpupool worker --share --coordinator URL --token-file enroll.token\n"
                    "gpupool worker pause --why \"training tonight\"      # then: gpupool worker resume\n"
                    "gpupool worker status",
                    "docs/worker.md (every option, the work dir, what the owner sees)", Reach::coordinator);
    add_help_footer(status, "gpupool worker status\ngpupool worker status --work-dir /srv/gpupool", "docs/worker.md",
                    Reach::local);
    add_help_footer(pause, "gpupool worker pause --why \"my own training tonight\"", "docs/worker.md", Reach::local);
    add_help_footer(resume, "gpupool worker resume", "docs/worker.md", Reach::local);
    register_worker_install(cli, sub);
    sub->callback([&cli, o, sub] {
        if (sub->get_subcommands().empty()) { // not status, pause, resume, install, uninstall
            cli.exit_code = run_worker(cli.global, *o);
        }
    });
}

} // namespace gpupool::cmd

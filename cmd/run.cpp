// `gpupool run RECIPE.toml`: the embedded default. One process holds a coordinator (HTTP on
// loopback, SQLite under ~/.local/share/gpupool/local/) and a worker (in podman or docker when one
// answers, else bare processes, which it says in one line); the recipe is submitted to it
// through the same API a remote pool uses, its logs and outputs come back here, and the summary
// says how every job ended. State persists between runs (history for estimates); a lock file keeps
// two runs from sharing it.
#include "cmd/run.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/jobs_view.hpp"
#include "cmd/remote.hpp"
#include "cmd/sweeps.hpp"
#include "core/api/admin.hpp"
#include "core/api/field_reader.hpp"
#include "core/archive/archive.hpp"
#include "core/client/jobs_client.hpp"
#include "core/client/read_answer.hpp"
#include "core/coordinator/service.hpp"
#include "core/credits/money.hpp"
#include "core/store/open_store.hpp"
#include "core/util/files.hpp"
#include "worker/agent/agent.hpp"
#include "worker/gpu/gpu_probe.hpp"
#include "worker/runtime/runtime_registry.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace gpupool::cmd {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The local pool's credentials, created on the first run and kept (0600) beside its database.
struct LocalCredentials {
    std::string admin;
    std::string member;
    std::string enroll;
};

Result<LocalCredentials> local_credentials(const fs::path& dir, std::uint16_t port, const std::string& fresh_admin) {
    const fs::path file = dir / "local.json";
    if (fresh_admin.empty()) {
        std::ifstream in(file);
        try {
            json j = json::parse(in);
            return LocalCredentials{j.at("admin").get<std::string>(), j.at("member").get<std::string>(),
                                    j.at("enroll").get<std::string>()};
        } catch (const std::exception&) {
            return make_error(ErrorCode::invalid_input, "the local pool in " + dir.string() +
                                                            " has lost its credentials (" + file.string() +
                                                            "); move that directory away to start a fresh local pool");
        }
    }
    config::ClientConfig cfg;
    cfg.url = "http://127.0.0.1:" + std::to_string(port);
    cfg.token = fresh_admin;
    client::ApiClient admin(cfg);
    if (auto t = admin.post("/v1/admin/teams", wire::to_json(wire::TeamCreateRequest{"local", 1})); !t) {
        return t.error();
    }
    const auto token = [&admin](const wire::TokenCreateRequest& request) {
        return client::read_answer(admin.post("/v1/admin/tokens", wire::to_json(request)), "POST /v1/admin/tokens",
                                   wire::created_token_from_json);
    };
    auto member = token({"member", "local", "gpupool run", 1});
    if (!member) {
        return member.error();
    }
    auto enroll = token({"enroll", "local", "gpupool run worker", 10000});
    if (!enroll) {
        return enroll.error();
    }
    LocalCredentials c{fresh_admin, member->token, enroll->token};
    // 0600 from its first byte: the tokens are never readable by others, not even for a moment.
    if (auto st = util::write_private_file(
            file, json{{"admin", c.admin}, {"member", c.member}, {"enroll", c.enroll}}.dump(2) + "\n");
        !st) {
        return st.error();
    }
    return c;
}

std::string seconds_text(const wire::AttemptView* attempt) {
    if (attempt == nullptr || !attempt->started_at || !attempt->ended_at) {
        return "-";
    }
    const auto ms = *attempt->ended_at - *attempt->started_at;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000.0);
    return buf;
}

std::string credits_text(const wire::JobView& job) {
    if (!job.cost_micro) {
        return "-";
    }
    return credits::format_credits(*job.cost_micro); // one format everywhere
}

// Jobs an interrupted earlier run left behind would otherwise run now, unasked.
void cancel_leftovers(client::JobsClient& pool) {
    if (auto left = pool.jobs()) {
        for (const auto& j : left->jobs) {
            if (!is_terminal_state(j.state)) {
                (void)pool.cancel_job(j.id);
            }
        }
    }
}

// One line, whatever an engine or a recipe put in it.
std::string one_line(const std::string& text) {
    std::string out = text;
    std::replace(out.begin(), out.end(), '\n', ' ');
    return printable(out);
}

// The images the recipe's jobs name, for the process runtime's warning.
std::string images_text(const std::vector<recipe::JobSpec>& jobs) {
    std::set<std::string> seen;
    std::string out;
    for (const auto& j : jobs) {
        if (seen.insert(j.image).second) {
            out += (out.empty() ? "" : ", ") + j.image;
        }
    }
    return out;
}

// Why `engine` cannot run these jobs although it answers: a job's image is a local one
// (`localhost/...`, built on this machine, never pulled from a registry) that the engine does not
// hold. Empty when it can. Images from registries are not looked at here: the worker pulls them.
std::string missing_local_image(worker::ContainerRuntime& engine, const std::vector<recipe::JobSpec>& jobs) {
    std::set<std::string> seen;
    for (const auto& j : jobs) {
        if (j.image.rfind("localhost/", 0) == 0 && seen.insert(j.image).second && !engine.ensure_image(j.image)) {
            return "it has no " + j.image + ", an image built on this machine";
        }
    }
    return {};
}

// The runtime the jobs run with. --runtime auto (the default): the first container engine that
// answers (podman, then docker) and holds the jobs' local images, so a job runs in its image as on
// the pool; else the process runtime, with one line on stderr saying what that means. A named one
// is used as it is.
Result<std::unique_ptr<worker::ContainerRuntime>>
choose_runtime(const RunOptions& o, const std::vector<recipe::JobSpec>& jobs, const fs::path& state_dir) {
    worker::RuntimeArgs args{o.runtime_args, {}, state_dir, true};
    std::string why = "asked for with --runtime process";
    if (o.runtime == k_auto_runtime) {
        if (!o.runtime_args.empty()) {
            return make_error(ErrorCode::invalid_input,
                              "--runtime-arg is for one engine: name it with --runtime podman or --runtime docker",
                              "runtime-arg");
        }
        std::string tried;
        for (const char* engine : {"podman", "docker"}) {
            auto made = worker::make_runtime(engine);
            Status works = made ? (*made)->check() : Status(made.error());
            std::string lacks = works ? missing_local_image(**made, jobs) : std::string();
            if (works && lacks.empty()) {
                return made;
            }
            tried += (tried.empty() ? "" : "; ") + std::string(engine) + ": " + (works ? lacks : works.error().message);
        }
        why = "no container engine could run them (" + tried + ")";
    } else if (o.runtime != "process") {
        return worker::make_runtime(o.runtime, o.runtime_args, {}, state_dir);
    }
    auto process = worker::find_runtime_kind("process")->make(args);
    if (process) {
        std::cerr << one_line("gpupool run: warning: runtime process: jobs run this machine's programs, not their "
                              "image (" +
                              images_text(jobs) + "), unisolated; " + why)
                  << std::endl;
    }
    return process;
}

// Where each job's outputs and log go: OUT/<job>/ and OUT/<job>.log. What an earlier run left there
// is kept unless --force (as `gpupool fetch` does): checked before anything runs, so a long run never
// ends unable to write.
Status check_out_dir(const fs::path& out_root, const std::vector<std::string>& names, bool force) {
    if (force) {
        return {};
    }
    std::vector<fs::path> taken;
    std::error_code ec;
    for (const auto& n : names) {
        const fs::path dir = out_root / n;
        if (fs::exists(fs::symlink_status(dir, ec)) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec))) {
            taken.push_back(dir);
        }
        if (fs::exists(fs::symlink_status(out_root / (n + ".log"), ec))) {
            taken.push_back(out_root / (n + ".log"));
        }
    }
    if (taken.empty()) {
        return {};
    }
    const std::string which = taken.size() == 1
                                  ? taken.front().string() + " exists"
                                  : taken.front().string() + " and " + std::to_string(taken.size() - 1) + " more exist";
    return make_error(ErrorCode::conflict,
                      which + " (an earlier run's outputs): --force replaces them, or --out DIR puts this run's "
                              "outputs elsewhere",
                      "out");
}

// The local pool's state directory (--data-dir, else ~/.local/share/gpupool/local), created, and
// the lock that keeps a second `gpupool run` out of it while this one holds it.
struct LocalState {
    fs::path dir;
    util::FileLock lock;
};

Result<LocalState> claim_local_state(const RunOptions& o) {
    const fs::path data = o.data_dir.empty() ? fs::path(default_data_dir()) / "local" : fs::path(o.data_dir);
    std::error_code ec;
    fs::create_directories(data, ec);
    if (ec) {
        return make_error(ErrorCode::io, "cannot create " + data.string() + ": " + ec.message());
    }
    auto lock = util::FileLock::acquire(data / "lock");
    if (!lock) {
        return lock.error().code != ErrorCode::conflict
                   ? lock.error()
                   : make_error(ErrorCode::conflict, "another `gpupool run` is using the local pool in " +
                                                         data.string() + "; wait for it or pass --data-dir");
    }
    return LocalState{data, std::move(*lock)};
}

// Blocked in every thread, and waited for by wait_for_run's own thread: the first Ctrl-C (SIGINT or
// SIGTERM) cancels the run's jobs; they stop and the summary still prints. SIGUSR2 is the run's own
// wake-up for that thread.
sigset_t block_run_signals() {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    return signals;
}

// The coordinator of the local pool: loopback, a free port, a quick tick.
coordinator::ServiceOptions local_service_options() {
    coordinator::ServiceOptions so;
    so.http.host = "127.0.0.1";
    so.http.port = 0;
    so.tick = std::chrono::milliseconds(100);
    // The local team has no grant: charges are recorded (the summary shows them) but not enforced.
    so.coordinator.credits.enforce = false;
    return so;
}

// The local pool's one worker, on loopback: it polls often and leaves quickly.
worker::AgentOptions local_agent_options(const std::string& url, const fs::path& data, const std::string& enroll) {
    worker::AgentOptions ao;
    ao.coordinator_url = url;
    ao.identity_key = "local:" + (data / "pool.db").string();
    ao.token = enroll;
    ao.name = "local";
    ao.work_dir = data / "worker";
    ao.heartbeat = std::chrono::milliseconds(1000);
    ao.poll_wait = std::chrono::milliseconds(300); // loopback: cheap, and shutdown waits for at most one poll
    ao.drain_grace = std::chrono::milliseconds(0);
    ao.give_up_after_drain = std::chrono::milliseconds(5000);
    return ao;
}

// Cancels what an interrupted earlier run left, uploads the jobs' inputs and submits the recipe's
// jobs: the reply has one id per job, in order.
Result<wire::SubmitReply> submit_run(const GlobalOptions& global, client::ApiClient& api, client::JobsClient& pool,
                                     const recipe::Recipe& recipe, std::vector<recipe::JobSpec>& jobs) {
    cancel_leftovers(pool);
    auto progress = [&global](const std::string& line) {
        if (!global.json) {
            std::cerr << line << std::endl;
        }
    };
    if (auto st = ship_inputs(api, jobs, {}, progress); !st) {
        return st.error();
    }
    wire::SubmitRequest request;
    request.source = recipe.source;
    request.max_parallel = recipe.sweep.max_parallel;
    request.jobs = jobs;
    auto res = pool.submit(request);
    if (!res) {
        return res.error();
    }
    if (res->jobs.size() != jobs.size()) {
        return make_error(ErrorCode::internal, "the local coordinator answered " + std::to_string(res->jobs.size()) +
                                                   " job ids for " + std::to_string(jobs.size()) + " jobs");
    }
    return res;
}

// How the jobs ended (nothing when waiting failed, which was reported), and whether a signal
// cancelled them on the way.
struct Waited {
    std::optional<std::vector<wire::JobView>> done;
    bool interrupted = false;
};

// Waits for the submitted jobs, following a lone job's log. A SIGINT or SIGTERM meanwhile cancels
// the sweep, on a connection of its own; the jobs then end and are waited for as usual.
Waited wait_for_run(const GlobalOptions& global, client::ApiClient& api, const config::ClientConfig& cfg,
                    const sigset_t& signals, const wire::SubmitReply& submitted) {
    std::atomic<bool> interrupted{false};
    std::thread waiter([&] {
        int sig = 0;
        sigwait(&signals, &sig);
        if (sig == SIGUSR2) {
            return;
        }
        interrupted = true;
        std::cerr << "\ngpupool run: interrupted; cancelling the run's jobs" << std::endl;
        client::ApiClient api2(cfg);
        (void)client::JobsClient(api2).cancel_sweep(submitted.sweep_id);
    });
    const std::vector<JobId>& ids = submitted.jobs;
    if (ids.size() == 1 && !global.json) {
        (void)stream_logs(global, api, ids.front(), true);
    }
    Waited w;
    w.done = wait_for_jobs(global, api, ids);
    if (!interrupted) {
        pthread_kill(waiter.native_handle(), SIGUSR2);
    }
    waiter.join();
    w.interrupted = interrupted;
    return w;
}

// One job as the summary shows it: its row of the table and its entry of the JSON document.
struct JobReport {
    std::vector<std::string> row;
    json entry;
    bool succeeded = false;
};

// Writes one job's outputs to OUT/<name>/ and its log to OUT/<name>.log (replacing what was there,
// which check_out_dir allowed before the run), and says how it ended.
JobReport collect_job(client::JobsClient& pool, const wire::JobView& j, JobId id, const fs::path& out_root,
                      const std::string& name, bool force) {
    const fs::path dir = out_root / name;
    std::vector<std::string> files;
    std::error_code ec;
    // Checked before the run; something put there since is kept, and this job's outputs are not written.
    auto writable = check_out_dir(out_root, {name}, force);
    if (!writable) {
        std::cerr << "job " << id.value() << ": " << printable(writable.error().message) << '\n';
    } else {
        fs::remove_all(dir, ec);
        fs::remove(out_root / (name + ".log"), ec);
        fs::create_directories(dir, ec);
    }
    if (auto bytes = pool.outputs(id); writable && bytes && !bytes->empty()) {
        if (auto unpacked = archive::unpack_archive(*bytes, dir)) {
            files = unpacked->written;
            for (const auto& s : unpacked->skipped) {
                std::cerr << "warning: skipped " << printable(s) << '\n';
            }
        } else {
            std::cerr << "job " << id.value() << ": " << printable(unpacked.error().message) << '\n';
        }
    }
    if (auto logs = pool.logs(id, 0); logs && writable) {
        std::ofstream(out_root / (name + ".log"), std::ios::binary) << logs->data;
    }
    const wire::AttemptView* last = j.attempt_history.empty() ? nullptr : &j.attempt_history.back();
    const std::string exit = j.exit_code ? std::to_string(*j.exit_code) : "-";
    JobReport r;
    r.succeeded = j.state == "succeeded";
    r.row = {j.name,
             j.state,
             exit,
             seconds_text(last),
             credits_text(j),
             files.empty() ? "-" : dir.string() + "/ (" + std::to_string(files.size()) + ")"};
    r.entry = {{"id", id.value()},
               {"name", j.name},
               {"state", j.state},
               {"exit_code", wire::or_null(j.exit_code)},
               {"reason", j.reason},
               {"runtime", seconds_text(last)},
               {"cost_micro", wire::or_null(j.cost_micro)},
               {"outputs_dir", dir.string()},
               {"outputs", files}};
    return r;
}

// Collects every job's outputs and log, then prints the summary: a table with why each job that
// did not succeed failed, or one JSON document. Returns how many did not succeed.
int report_run(const GlobalOptions& global, client::JobsClient& pool, const RunOptions& o,
               const wire::SubmitReply& submitted, const std::vector<wire::JobView>& done,
               const std::vector<std::string>& names, bool interrupted) {
    const fs::path out_root = o.out_dir;
    json summary = json::array();
    std::vector<std::vector<std::string>> rows{{"JOB", "STATE", "EXIT", "RUNTIME", "CREDITS", "OUTPUTS"}};
    int failed = 0;
    for (std::size_t i = 0; i < done.size(); ++i) {
        JobReport r = collect_job(pool, done[i], submitted.jobs[i], out_root, names[i], o.force);
        failed += r.succeeded ? 0 : 1;
        rows.push_back(std::move(r.row));
        summary.push_back(std::move(r.entry));
    }
    if (global.json) {
        std::cout << json{{"sweep_id", submitted.sweep_id.value()}, {"jobs", summary}, {"failed", failed}}.dump(2)
                  << '\n';
        return failed;
    }
    const std::size_t total = submitted.jobs.size();
    std::cout << '\n';
    print_table(rows);
    std::cout << (total - static_cast<std::size_t>(failed)) << " of " << total << " succeeded"
              << (interrupted ? " (interrupted)" : "") << "; outputs and logs in " << out_root.string() << "/\n";
    for (const auto& j : done) {
        if (j.state != "succeeded") {
            std::cout << "  " << printable(j.name) << ": " << printable(j.reason) << '\n';
        }
    }
    return failed;
}

// OUT/<name>/ of each job, in the recipe's order.
std::vector<std::string> job_folder_names(const std::vector<recipe::JobSpec>& jobs) {
    std::vector<NamedJob> named;
    for (const auto& j : jobs) {
        named.push_back({JobId{}, j.name, j.sweep_index});
    }
    return folder_names(named);
}

} // namespace

// The steps: the recipe and where its outputs go; the local pool's state and a runtime; the pool
// itself (a coordinator and one worker in this process); submit, wait, collect and report; stop.
int run_run(const GlobalOptions& global, const RunOptions& o) {
    auto loaded = load_recipe(global, o.recipe);
    if (!loaded) {
        return k_exit_failed;
    }
    auto& [recipe, jobs] = *loaded;
    // GPU memory from the models, refused below their weights: as `submit` does, so that a recipe
    // that runs here is one the pool takes (docs/evidence.md).
    const auto sizing = size_recipe(global, o.sizing, recipe, jobs, false);
    if (!sizing) {
        return k_exit_failed;
    }
    print_sizing(*sizing, std::cerr, false);
    const auto names = job_folder_names(jobs);
    if (auto st = check_out_dir(o.out_dir, names, o.force); !st) {
        report_error(global, st.error());
        return k_exit_failed;
    }
    auto state = claim_local_state(o);
    if (!state) {
        report_error(global, state.error());
        return k_exit_failed;
    }
    const fs::path& data = state->dir;
    // The process runtime's records let the next run clean up after a run that was killed with SIGKILL.
    auto runtime = choose_runtime(o, jobs, data / "worker" / "process-runtime");
    if (!runtime) {
        report_error(global, runtime.error());
        return k_exit_usage;
    }
    const sigset_t signals = block_run_signals();

    auto opened = store::open_store(store::StoreSpec{store::Engine::sqlite, (data / "pool.db").string()});
    if (!opened) {
        report_error(global, opened.error());
        return k_exit_failed;
    }
    coordinator::CoordinatorService service(local_service_options(), std::move(*opened), coordinator::system_clock());
    std::string fresh_admin;
    if (auto st = service.start(&fresh_admin); !st) {
        report_error(global, st.error());
        return k_exit_failed;
    }
    auto creds = local_credentials(data, service.port(), fresh_admin);
    if (!creds) {
        report_error(global, creds.error());
        service.stop();
        return k_exit_failed;
    }
    const std::string url = "http://127.0.0.1:" + std::to_string(service.port());
    worker::NvidiaSmiProbe probe;
    worker::Agent agent(local_agent_options(url, data, creds->enroll), **runtime, probe);
    Status agent_status;
    std::thread agent_thread([&] { agent_status = agent.run(); });
    auto finish = [&](int rc) {
        agent.drain();
        agent_thread.join();
        service.stop();
        return rc;
    };

    config::ClientConfig cfg;
    cfg.url = url;
    cfg.token = creds->member;
    client::ApiClient api(cfg);
    client::JobsClient jobs_api(api);
    auto submitted = submit_run(global, api, jobs_api, recipe, jobs);
    if (!submitted) {
        report_error(global, submitted.error());
        return finish(k_exit_failed);
    }
    if (!global.json) {
        const std::size_t n = submitted->jobs.size();
        std::cerr << "gpupool run: " << n << (n == 1 ? " job" : " jobs") << " from " << recipe.source
                  << " on the local pool (runtime " << (*runtime)->name() << ", state in " << data.string() << ")\n";
    }
    Waited waited = wait_for_run(global, api, cfg, signals, *submitted);
    if (!waited.done) {
        return finish(k_exit_failed);
    }
    const int failed = report_run(global, jobs_api, o, *submitted, *waited.done, names, waited.interrupted);
    const int rc = finish(failed == 0 && !waited.interrupted ? k_exit_ok : k_exit_failed);
    if (!agent_status) {
        report_error(global, agent_status.error());
        return k_exit_failed;
    }
    return rc;
}

void register_run(Cli& cli) {
    auto o = std::make_shared<RunOptions>();
    CLI::App* sub =
        add_command(cli, "run", "Run a recipe locally: in-process coordinator + worker, logs and outputs here");
    add_help_footer(sub,
                    "gpupool run recipes/hello-sweep/recipe.toml\ngpupool run eval.toml --runtime podman --out results",
                    "docs/worker.md (The local mode), docs/recipes.md", Reach::local);
    add_recipe_args(sub, o->recipe);
    auto runtimes = worker::runtime_names();
    runtimes.insert(runtimes.begin(), k_auto_runtime);
    sub->add_option("--runtime", o->runtime,
                    "How jobs run: auto (podman or docker when one answers, else process), podman, docker, or "
                    "process (this machine's programs, no isolation)")
        ->check(CLI::IsMember(runtimes))
        ->capture_default_str();
    sub->add_option("--runtime-arg", o->runtime_args,
                    "Extra global flag for podman/docker (repeatable; with --runtime)");
    sub->add_option("--out", o->out_dir, "Where outputs go: OUT/<job>/ and OUT/<job>.log")->capture_default_str();
    sub->add_flag("--force", o->force, "Replace what an earlier run left at OUT/<job>/ and OUT/<job>.log");
    sub->add_option("--data-dir", o->data_dir, "The local pool's state (default ~/.local/share/gpupool/local)");
    add_sizing_args(sub, o->sizing);
    sub->callback([&cli, o] { cli.exit_code = run_run(cli.global, *o); });
}

} // namespace gpupool::cmd

// `gpupool worker status | pause | resume | reload`: the owner's controls. Each asks the worker
// running on the work dir over its control socket (worker/owner/control_socket.hpp); when none
// runs, status shows what the files say and pause/resume change the pause file, which the next
// start reads.
#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "cmd/worker.hpp"
#include "core/api/credits.hpp"
#include "core/api/owner_terms.hpp"
#include "core/client/api_client.hpp"
#include "core/client/read_answer.hpp"
#include "core/config/client_config.hpp"
#include "core/credits/money.hpp"
#include "core/resources/quantity.hpp"
#include "core/util/time_text.hpp"
#include "worker/agent/agent.hpp"
#include "worker/owner/control_socket.hpp"
#include "worker/owner/owner_policy.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>

namespace gpupool::cmd {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string ago(std::int64_t ms) {
    return resources::format_duration_s(std::max<std::int64_t>(0, (now_ms() - ms) / 1000)) + " ago";
}

// What the worker's files say when no worker runs.
json offline_state(const fs::path& work, const std::optional<worker::OwnerConfig>& cfg) {
    json j{{"running", false}};
    if (auto p = worker::pause_in_force(work, now_ms())) {
        j["state"] = "paused";
        j["description"] = "paused" + (p->until_ms ? " until " + util::local_time_text(*p->until_ms) : std::string()) +
                           (p->why.empty() ? std::string() : " (" + p->why + ")");
        return j;
    }
    const auto v = worker::sharing_window_at(cfg ? cfg->share.windows.value_or(std::vector<worker::ShareWindow>{})
                                                 : std::vector<worker::ShareWindow>{},
                                             now_ms());
    j["state"] = v.open ? "sharing" : "outside_window";
    j["description"] = v.open
                           ? std::string("sharing when started")
                           : "outside its sharing window" +
                                 (v.changes_at_ms ? "; the next window opens " + util::local_time_text(*v.changes_at_ms)
                                                  : std::string());
    return j;
}

// ", shares capped by MPS" / ", shares enforced by the watchdog" / ", shares NOT enforced".
std::string enforcement_phrase(const std::string& e) {
    if (e == "mps") {
        return ", shares capped by MPS";
    }
    if (e == "watchdog") {
        return ", shares enforced by the watchdog";
    }
    return e == "none" ? ", shares NOT enforced" : "";
}

void print_live(const json& live) {
    std::cout << "  state       " << printable(live.value("description", "")) << '\n';
    for (const auto& g : live["gpus"]) {
        std::cout << "  GPU " << g["index"].get<std::int64_t>() << "       " << printable(g["name"]) << ", "
                  << (g["shared"].get<bool>()
                          ? resources::format_memory_mib(g["offered_mib"].get<std::int64_t>()) + " offered" +
                                enforcement_phrase(g.value("memory_enforcement", std::string()))
                          : std::string("not shared"));
        bool any = false;
        for (const auto& j : live["jobs"]) {
            if (j["gpu_index"] == g["index"]) {
                std::cout << (any ? "; " : ": ") << "job " << j["job"].get<std::int64_t>() << " `"
                          << printable(j["name"]) << "` (team " << printable(j["team"]) << ", " << printable(j["image"])
                          << ", " << resources::format_milli(j["gpu_milli"].get<std::int64_t>()) << " GPU, running "
                          << resources::format_duration_s(j["runtime_s"].get<std::int64_t>()) << ")";
                any = true;
            }
        }
        std::cout << (any ? "" : ": idle") << '\n';
    }
    for (const auto& j : live["jobs"]) {
        if (j["gpu_index"].get<std::int64_t>() < 0) {
            std::cout << "  no GPU      job " << j["job"].get<std::int64_t>() << " `" << printable(j["name"])
                      << "` (team " << printable(j["team"]) << ", running "
                      << resources::format_duration_s(j["runtime_s"].get<std::int64_t>()) << ")\n";
        }
    }
    std::cout << "  contact     "
              << (live["last_contact_ms"].is_number_integer()
                      ? "the coordinator answered " + ago(live["last_contact_ms"].get<std::int64_t>())
                      : std::string("not reached since the worker started"))
              << '\n';
}

// The owner's terms as the running worker says them (its `terms`), else as worker.toml has them.
api::OwnerTerms terms_of(const std::optional<json>& live, const std::optional<worker::OwnerConfig>& cfg) {
    if (live && live->contains("terms")) {
        if (auto t = api::owner_terms_from_json((*live)["terms"])) {
            return *t;
        }
    }
    api::OwnerTerms t;
    if (cfg) {
        const auto& s = cfg->share;
        t.max_runtime_s = s.max_runtime_s.value_or(0);
        t.teams = s.teams.value_or(std::vector<std::string>{});
        t.registries = s.registries.value_or(std::vector<std::string>{});
        t.max_jobs = s.max_jobs.value_or(0);
        for (const auto& w : s.windows.value_or(std::vector<worker::ShareWindow>{})) {
            t.hours.push_back(worker::window_text(w) + " (local time)");
        }
    }
    return t;
}

void print_terms(const api::OwnerTerms& terms) {
    const auto items = api::describe_terms(terms);
    for (std::size_t i = 0; i < items.size(); ++i) {
        std::cout << (i == 0 ? "  terms       " : "              ") << printable(items[i]) << '\n';
    }
}

void print_earnings(const wire::WorkerEarningsReply& e, const wire::CreditsReply& c) {
    std::cout << "  earned      " << credits::format_credits(e.today_micro) << " today, "
              << credits::format_credits(e.week_micro) << " this week, " << credits::format_credits(e.total_micro)
              << " all time (this worker; days from 00:00 UTC, weeks from Monday 00:00 UTC)\n";
    std::cout << "  settling    " << credits::format_credits(e.settling_micro)
              << " credits of it (paid out when the pool's settling period ends)\n";
    std::cout << "  team        " << printable(c.team) << ": " << credits::format_credits(c.balance_micro)
              << " credits available, " << credits::format_credits(c.settling_micro) << " settling\n";
}

} // namespace

// `gpupool worker status`: the owner's view with the identity the machine already has (no
// second token): the worker's state and jobs (from the running worker, or the files when none
// runs), which pool and worker this is, its owner's terms, and what this worker has earned
// (summed by the coordinator: GET /v1/workers/{id}/earnings).
int run_worker_status(const GlobalOptions& global, const WorkerCmdOptions& o) {
    auto cfg = load_worker_toml(o);
    if (!cfg) {
        report_error(global, cfg.error());
        return k_exit_usage;
    }
    const fs::path work = worker_work_dir(o, *cfg);
    auto live = worker::control_request(work, json{{"op", "status"}});
    if (!live && live.error().code != ErrorCode::not_found) {
        report_error(global, live.error());
        return k_exit_failed;
    }
    // A running worker whose loop waits on the coordinator answers {"ok": false, "error": "... busy ..."}:
    // it runs, and says nothing more now (its state, GPUs and jobs are not in that answer).
    const bool answered = live && live->value("ok", false);
    const json state =
        answered ? *live
        : live
            ? json{{"running", true},
                   {"state", nullptr},
                   {"description", "running, did not say more now: " + live->value("error", std::string("no answer"))}}
            : offline_state(work, *cfg);
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
    for (auto it = fs::directory_iterator(work / "attempts", ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
        ++spooled;
    }
    config::ClientConfig cc;
    cc.url = coordinator;
    cc.url_source = (work / "worker.json").string();
    cc.token = id->token;
    if (global.ca_cert) {
        cc.ca_cert = *global.ca_cert;
    }
    client::ApiClient api(cc);
    auto credits =
        client::read_answer(api.get("/v1/credits?limit=0"), "GET /v1/credits", wire::credits_reply_from_json);
    const std::string earned = "/v1/workers/" + std::to_string(id->worker_id) + "/earnings";
    auto earnings = credits ? client::read_answer(api.get(earned), "GET " + earned, wire::worker_earnings_from_json)
                            : Result<wire::WorkerEarningsReply>(credits.error());
    const gpupool::api::OwnerTerms terms = terms_of(answered ? std::optional<json>(*live) : std::nullopt, *cfg);
    // What the machine knows is shown even when the coordinator cannot say what it earned (it is
    // down, or unreachable from here): that is when an owner looks. The exit status says it failed.
    if (global.json) {
        json out{{"coordinator", coordinator},
                 {"worker_id", id->worker_id},
                 {"worker", state},
                 {"state", state.value("state", json())},
                 {"paused", worker::paused_since(work) ? json(*worker::paused_since(work)) : json()},
                 {"spooled_attempts", spooled},
                 {"terms", gpupool::api::to_json(terms)},
                 {"credits", credits ? wire::to_json(*credits) : json()},
                 {"earnings", earnings ? wire::to_json(*earnings) : json()}};
        if (!earnings) {
            out["error"] = json(error_json(earnings.error())); // one document on stdout, not two
        }
        std::cout << out.dump(2) << '\n';
        return earnings ? k_exit_ok : k_exit_failed;
    }
    std::cout << "worker " << id->worker_id
              << (credits ? " of team " + printable(credits->team) : std::string()) << " on " << coordinator
              << " (work dir " << work.string() << ", " << spooled << " attempt(s) spooled)\n";
    if (answered) {
        print_live(*live);
    } else if (live) {
        std::cout << "  worker      " << printable(state["description"].get<std::string>()) << '\n';
    } else {
        std::cout << "  worker      not running (`gpupool worker --share` starts it)\n"
                  << "  state       " << printable(state["description"].get<std::string>()) << '\n';
    }
    print_terms(terms);
    if (!earnings) {
        std::cout << std::flush;
        report_error(global, earnings.error());
        return k_exit_failed;
    }
    print_earnings(*earnings, *credits);
    return k_exit_ok;
}

// `gpupool worker pause|resume`: asks the running worker; without one, writes or removes
// <work_dir>/paused, which the next start reads.
int run_worker_pause(const GlobalOptions& global, const WorkerCmdOptions& o, bool pause) {
    auto cfg = load_worker_toml(o);
    if (!cfg) {
        report_error(global, cfg.error());
        return k_exit_usage;
    }
    const fs::path work = worker_work_dir(o, *cfg);
    std::optional<std::int64_t> for_s;
    if (pause && !o.pause_for.empty()) {
        auto d = resources::parse_duration_s(o.pause_for);
        if (!d || *d <= 0) {
            Error e = d ? make_error(ErrorCode::invalid_input, "expected a duration over zero") : d.error();
            e.field = "--for";
            report_error(global, e);
            return k_exit_usage;
        }
        for_s = *d;
    }
    json req{{"op", pause ? "pause" : "resume"}};
    if (pause) {
        req["why"] = o.pause_why;
        req["now"] = o.pause_now;
        if (for_s) {
            req["for_s"] = *for_s;
        }
    }
    auto live = worker::control_request(work, req);
    if (!live && live.error().code != ErrorCode::not_found) {
        report_error(global, live.error());
        return k_exit_failed;
    }
    if (live && !live->value("ok", false)) {
        report_error(global, make_error(ErrorCode::invalid_input, live->value("error", std::string("refused"))));
        return k_exit_failed;
    }
    std::string said;
    std::optional<std::int64_t> until = for_s ? std::optional(now_ms() + *for_s * 1000) : std::nullopt;
    if (live) {
        said = pause ? "paused: the worker takes no new jobs" +
                           (o.pause_now ? "; its " + std::to_string(live->value("stopped", 0)) +
                                              " running job(s) are being handed back to the pool"
                                        : std::string("; running jobs go on"))
                     : "resumed: " + live->value("description", std::string("sharing"));
        if (pause && (*live)["until_ms"].is_number_integer()) {
            until = (*live)["until_ms"].get<std::int64_t>();
        }
    } else {
        if (!worker::read_stored_identity(work)) {
            report_error(global, make_error(ErrorCode::not_found,
                                            "no worker identity in " + (work / "worker.json").string() +
                                                ": no worker shares from this work dir (pass --work-dir)",
                                            "--work-dir"));
            return k_exit_failed;
        }
        auto st = pause ? worker::pause_sharing(work, o.pause_why, until) : worker::resume_sharing(work);
        if (!st) {
            report_error(global, st.error());
            return k_exit_failed;
        }
        said = std::string("no worker is running with ") + work.string() + ": " +
               (pause ? "it starts paused" : "it shares when it starts");
    }
    if (pause && until) {
        said += "; sharing again at " + util::local_time_text(*until);
    } else if (pause) {
        said += ". `gpupool worker resume` shares again";
    }
    if (global.json) {
        std::cout << json{{"paused", pause},
                          {"work_dir", work.string()},
                          {"running", live.has_value()},
                          {"until_ms", until ? json(*until) : json()}}
                         .dump()
                  << '\n';
    } else {
        std::cout << said << '\n';
    }
    return k_exit_ok;
}

int run_worker_reload(const GlobalOptions& global, const WorkerCmdOptions& o) {
    auto cfg = load_worker_toml(o);
    const fs::path work = worker_work_dir(o, cfg ? *cfg : std::nullopt);
    auto live = worker::control_request(work, json{{"op", "reload"}});
    if (!live) {
        report_error(global, live.error().code == ErrorCode::not_found
                                 ? make_error(ErrorCode::not_found,
                                              live.error().message + ": worker.toml is read when the worker starts")
                                 : live.error());
        return k_exit_failed;
    }
    if (!live->value("ok", false)) {
        report_error(global,
                     make_error(ErrorCode::invalid_input, "not reloaded: " + live->value("error", std::string())));
        return k_exit_failed;
    }
    if (global.json) {
        std::cout << live->dump() << '\n';
    } else {
        std::cout << "reloaded: " << printable(live->value("description", std::string())) << '\n';
    }
    return k_exit_ok;
}

} // namespace gpupool::cmd

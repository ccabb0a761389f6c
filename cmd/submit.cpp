#include "cmd/submit.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/jobs_view.hpp"
#include "cmd/pricing.hpp"
#include "cmd/remote.hpp"
#include "cmd/sweeps.hpp"
#include "core/api/credits.hpp"
#include "core/client/jobs_client.hpp"
#include "core/client/read_answer.hpp"
#include "core/util/token_secret.hpp"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

namespace gpupool::cmd {

namespace {
constexpr int k_submit_retries = 3; // after a transport failure, with the same idempotency key

// --follow: one job's log as `logs -f` prints it; a sweep's as `logs --sweep ID -f` does, each line
// under its job's name. Whether the jobs succeeded is for the summary after; this fails only when
// the logs could not be read.
int follow_submitted(const GlobalOptions& global, client::ApiClient& api, const wire::SubmitReply& submitted) {
    if (submitted.jobs.size() == 1) {
        return stream_logs(global, api, submitted.jobs.front(), true);
    }
    auto jobs = sweep_jobs(api, submitted.sweep_id);
    if (!jobs) {
        report_error(global, jobs.error());
        return k_exit_failed;
    }
    return follow_logs_to_end(global, api, *jobs, false).has_value() ? k_exit_ok : k_exit_failed;
}

// Before any input is packed or uploaded: whether the pool could ever run every job (POST
// /v1/estimate makes the check that submit makes), so that a job no worker can run is refused before
// its inputs travel, and whether any worker takes work now, so that a submission to an empty or idle
// pool says at once that its jobs will wait. Only a refusal stops here; a pool that cannot answer is
// left to the submission, which checks again.
Status check_runnable(client::ApiClient& api, const wire::SubmitRequest& request) {
    auto answer = client::read_answer(api.post("/v1/estimate", wire::to_json(request)), "POST /v1/estimate",
                                      wire::estimate_reply_from_json);
    if (!answer) {
        return answer.error().code == ErrorCode::invalid_input ? Status(answer.error()) : Status{};
    }
    const std::int64_t joined = answer->workers_joined.value_or(-1); // left out by an older coordinator
    const std::int64_t online = answer->workers_online.value_or(-1);
    if (joined == 0) {
        std::cerr << "note: no worker is connected to the pool yet; the jobs wait until one joins\n";
    } else if (joined > 0 && online == 0) {
        std::cerr << "note: none of the pool's " << joined << (joined == 1 ? " worker takes" : " workers take")
                  << " work now (offline, paused, draining or outside its sharing hours); the jobs wait until one "
                     "does\n";
    }
    return {};
}

} // namespace

int run_submit(const SubmitOptions& opts) {
    const GlobalOptions& global = opts.global;
    auto loaded = load_recipe(global, opts.recipe);
    if (!loaded) {
        return k_exit_failed;
    }
    auto& [recipe, jobs] = *loaded;
    const auto sizing = size_recipe(global, opts.sizing, recipe, jobs, false);
    if (!sizing) {
        return k_exit_failed;
    }
    if (opts.dry_run) {
        nlohmann::json e = estimate_recipe(global, recipe.source, jobs, false);
        if (!sizing->json.is_null()) {
            e["gpu_memory"] = sizing->json;
        }
        print_jobs(global, recipe, jobs, &e);
        if (!global.json) {
            std::cout << '\n';
            print_sizing(*sizing, std::cout, true);
            print_price_estimate(e);
        }
        return k_exit_ok;
    }
    if (!global.json) {
        print_sizing(*sizing, std::cerr, false);
    }
    auto api = connect(global);
    if (!api) {
        return k_exit_failed;
    }
    auto progress = [&global](const std::string& line) {
        if (!global.json) {
            std::cerr << line << std::endl;
        }
    };
    wire::SubmitRequest request;
    request.source = recipe.source;
    request.max_parallel = recipe.sweep.max_parallel;
    if (!opts.team.empty()) {
        request.team = opts.team;
    }
    request.allow_unfunded = opts.allow_unfunded;
    request.jobs = jobs; // without their inputs' digests: what can run does not depend on them
    if (auto st = check_runnable(*api, request); !st) {
        report_error(global, st.error());
        return k_exit_failed;
    }
    if (auto st = ship_inputs(*api, jobs, opts.team, progress); !st) {
        report_error(global, st.error());
        return k_exit_failed;
    }
    request.jobs = std::move(jobs);
    // One key for this submission: if the answer is lost (connection reset, coordinator restart),
    // the retries below carry the same key and get the same sweep back, never a second copy.
    auto key = util::new_token_secret();
    if (!key) {
        report_error(global, key.error());
        return k_exit_failed;
    }
    request.idempotency_key = "submit-" + key->substr(key->size() - 32);
    client::JobsClient pool(*api);
    auto res = pool.submit(request);
    for (int retry = 1; !res && res.error().code == ErrorCode::unavailable && retry <= k_submit_retries; ++retry) {
        std::cerr << "submit: " << printable(res.error().message) << "; retrying (" << retry << "/" << k_submit_retries
                  << ")\n";
        std::this_thread::sleep_for(std::chrono::seconds(retry));
        res = pool.submit(request);
    }
    if (!res) {
        report_error(global, res.error());
        return k_exit_failed;
    }
    const std::vector<JobId>& ids = res->jobs;
    if (ids.empty()) {
        report_error(global, make_error(ErrorCode::internal, "the coordinator answered the submission with no jobs"));
        return k_exit_failed;
    }
    if (global.json && !opts.wait) {
        std::cout << wire::to_json(*res).dump(2) << '\n';
    } else if (!global.json) {
        std::cout << "submitted sweep " << res->sweep_id.value() << ": " << ids.size()
                  << (ids.size() == 1 ? " job" : " jobs") << " (id " << ids.front().value();
        if (ids.size() > 1) {
            std::cout << ".." << ids.back().value();
        }
        std::cout << ")\n";
    }
    if (opts.follow) {
        if (int rc = follow_submitted(global, *api, *res); rc != k_exit_ok) {
            return rc;
        }
    }
    if (opts.wait || opts.follow) {
        auto done = wait_for_jobs(global, *api, ids, !global.json); // the count needs only the states
        if (!done) {
            return k_exit_failed;
        }
        const int failed = count_unsuccessful(*done);
        if (global.json) {
            std::cout << nlohmann::json{{"sweep_id", res->sweep_id.value()}, {"jobs", jobs_json(*done)}}.dump(2)
                      << '\n';
        } else {
            std::vector<std::string> names;
            for (const auto& spec : request.jobs) {
                names.push_back(spec.name);
            }
            print_outcome(*api, *done, names);
        }
        return failed == 0 ? k_exit_ok : k_exit_failed;
    }
    return k_exit_ok;
}

void register_submit(Cli& cli) {
    auto opts = std::make_shared<SubmitOptions>();
    CLI::App* sub = add_command(cli, "submit", "Submit a recipe (one job or a whole sweep) to the pool");
    add_help_footer(sub,
                    "gpupool submit eval.toml\ngpupool submit eval.toml --set resources.gpu_memory=16GiB --wait\n"
                    "gpupool submit eval.toml --dry-run    # the expanded jobs and their estimate",
                    "docs/recipes.md, docs/credits.md", Reach::coordinator);
    add_recipe_args(sub, opts->recipe);
    add_sizing_args(sub, opts->sizing);
    sub->add_flag("--dry-run", opts->dry_run, "Validate and print the jobs and their estimated cost; submits nothing");
    sub->add_flag("--wait", opts->wait, "Wait for the jobs to finish; exit 1 if any did not succeed");
    sub->add_flag("--follow,-f", opts->follow,
                  "Stream the jobs' logs as they run (a sweep's as `logs --sweep ID -f` does, each line under its "
                  "job's name), then print how they ended; exit 1 if any did not succeed");
    sub->add_flag("--allow-unfunded", opts->allow_unfunded,
                  "Submit even if the estimate exceeds your team's credits or budget; jobs wait for funds");
    sub->add_option("--team", opts->team, "Team to submit for (admins only; members submit for their team)");
    sub->callback([&cli, opts] {
        opts->global = cli.global;
        cli.exit_code = run_submit(*opts);
    });
}

} // namespace gpupool::cmd

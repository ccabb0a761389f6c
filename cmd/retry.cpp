#include "cmd/retry.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "core/client/jobs_client.hpp"
#include "core/util/token_secret.hpp"

#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

namespace gpupool::cmd {

namespace {

constexpr int k_retry_retries = 3; // after a transport failure, with the same idempotency key

// What the flags ask for, or the usage error.
Result<wire::RetryRequest> retry_request(const RetryOptions& o) {
    if (o.jobs.empty() == (o.sweep == 0)) {
        return make_error(ErrorCode::invalid_input,
                          o.jobs.empty() ? "retry what? name job ids (`gpupool retry 12 13`) or a sweep "
                                           "(`gpupool retry --sweep 4 --failed`); `gpupool jobs` lists them"
                                         : "name job ids or --sweep ID, not both",
                          o.jobs.empty() ? "jobs" : "--sweep");
    }
    if (o.sweep == 0 && (o.failed || o.cancelled)) {
        return make_error(ErrorCode::invalid_input,
                          "--failed and --cancelled pick a sweep's jobs: use them with --sweep ID (named jobs are "
                          "retried whichever way they ended)",
                          o.failed ? "--failed" : "--cancelled");
    }
    wire::RetryRequest r;
    for (auto id : o.jobs) {
        if (id <= 0) {
            return make_error(ErrorCode::invalid_input, "job ids are positive, got " + std::to_string(id), "jobs");
        }
        r.jobs.emplace_back(id);
    }
    if (o.sweep < 0) {
        return make_error(ErrorCode::invalid_input, "sweep ids are positive, got " + std::to_string(o.sweep),
                          "--sweep");
    }
    r.sweep = SweepId(o.sweep);
    if (o.failed) {
        r.states.emplace_back("failed");
    }
    if (o.cancelled) {
        r.states.emplace_back("cancelled");
    }
    r.allow_unfunded = o.allow_unfunded;
    return r;
}

} // namespace

int run_retry(const RetryOptions& o) {
    const GlobalOptions& global = o.global;
    auto request = retry_request(o);
    if (!request) {
        report_error(global, request.error());
        return k_exit_usage;
    }
    auto api = connect(global);
    if (!api) {
        return k_exit_failed;
    }
    // One key for this retry: if the answer is lost, the retries below get the same retry back,
    // never a second one.
    auto key = util::new_token_secret();
    if (!key) {
        report_error(global, key.error());
        return k_exit_failed;
    }
    request->idempotency_key = "retry-" + key->substr(key->size() - 32);
    client::JobsClient pool(*api);
    auto res = pool.retry(*request);
    for (int again = 1; !res && res.error().code == ErrorCode::unavailable && again <= k_retry_retries; ++again) {
        std::cerr << "retry: " << printable(res.error().message) << "; trying again (" << again << "/"
                  << k_retry_retries << ")\n";
        std::this_thread::sleep_for(std::chrono::seconds(again));
        res = pool.retry(*request);
    }
    if (!res) {
        report_error(global, res.error());
        return k_exit_failed;
    }
    std::vector<JobId> ids;
    for (const auto& j : res->jobs) {
        ids.push_back(j.id);
    }
    if (global.json && !o.wait) {
        std::cout << wire::to_json(*res).dump(2) << '\n';
    } else if (!global.json) {
        for (const auto& j : res->jobs) {
            std::cout << "job " << j.id.value() << " queued again (retry " << j.retry << ")\n";
        }
    }
    if (!o.wait) {
        return k_exit_ok;
    }
    auto done = wait_for_jobs(global, *api, ids, !global.json);
    if (!done) {
        return k_exit_failed;
    }
    const int failed = count_unsuccessful(*done);
    if (global.json) {
        std::cout << nlohmann::json{{"jobs", jobs_json(*done)}}.dump(2) << '\n';
    } else {
        std::cout << (ids.size() - static_cast<std::size_t>(failed)) << " succeeded, " << failed << " did not\n";
    }
    return failed == 0 ? k_exit_ok : k_exit_failed;
}

void register_retry(Cli& cli) {
    auto o = std::make_shared<RetryOptions>();
    CLI::App* sub = add_command(cli, "retry", "Run failed or cancelled jobs again (the same jobs, their history kept)");
    add_help_footer(sub,
                    "gpupool retry 12 13\ngpupool retry --sweep 4 --failed --wait\n"
                    "gpupool retry --sweep 4 --failed --cancelled",
                    "README.md (Client commands), docs/credits.md", Reach::coordinator);
    sub->add_option("jobs", o->jobs, "Job ids (each failed or cancelled)");
    sub->add_option("--sweep", o->sweep, "Retry this sweep's failed jobs (or those --failed/--cancelled pick)");
    sub->add_flag("--failed", o->failed, "With --sweep: its failed jobs (the default)");
    sub->add_flag("--cancelled", o->cancelled, "With --sweep: its cancelled jobs");
    sub->add_flag("--allow-unfunded", o->allow_unfunded,
                  "Retry even if the estimate exceeds your team's credits or budget; jobs wait for funds");
    sub->add_flag("--wait", o->wait, "Wait for the jobs to finish; exit 1 if any did not succeed");
    sub->callback([&cli, o] {
        o->global = cli.global;
        cli.exit_code = run_retry(*o);
    });
}

} // namespace gpupool::cmd

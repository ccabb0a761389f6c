#include "cmd/price.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/jobs_view.hpp"
#include "cmd/pricing.hpp"
#include "cmd/remote.hpp"
#include "core/api/credits.hpp"
#include "core/client/api_client.hpp"
#include "core/client/read_answer.hpp"
#include "core/config/client_config.hpp"
#include "core/credits/catalog.hpp"
#include "core/credits/estimate.hpp"
#include "core/recipe/recipe_json.hpp"
#include "core/resources/quantity.hpp"

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>

namespace gpupool::cmd {

using json = nlohmann::json;
using credits::format_credits;
using credits::Micro;

namespace {

std::string money(Micro m) {
    return format_credits(m);
}

// Dollars with cents (micro-dollars in, rounded to the cent).
std::string dollars(Micro micro_usd) {
    const Micro cents = (micro_usd + 5'000) / 10'000;
    std::string c = std::to_string(cents % 100);
    return "$" + std::to_string(cents / 100) + "." + (c.size() == 1 ? "0" + c : c);
}

// The pool's part of an estimate (its `pool` member: the coordinator's /v1/estimate answer as
// pool_estimate wrote it), when there is one.
std::optional<wire::EstimateReply> pool_part(const json& pool) {
    if (pool.is_null()) {
        return std::nullopt;
    }
    auto reply = wire::estimate_reply_from_json(pool);
    return reply ? std::optional<wire::EstimateReply>(std::move(*reply)) : std::nullopt;
}

} // namespace

json price_estimate(const std::string& source, const std::vector<recipe::JobSpec>& jobs, const json& pool) {
    const auto& rates = credits::default_rate_catalog();
    const auto& prices = credits::default_price_catalog();
    const credits::CostEstimate estimate = credits::estimate_cost(jobs, rates, prices);
    json models = json::array();
    for (const auto& m : estimate.models) {
        json cloud = json::array();
        for (const auto& c : m.cloud) {
            cloud.push_back({{"provider", c.price->provider},
                             {"offering", c.price->offering},
                             {"usd_per_gpu_hour", money(c.price->micro_usd_per_gpu_hour)},
                             {"micro_usd", c.micro_usd},
                             {"date", c.price->date},
                             {"source", c.price->source}});
        }
        models.push_back({{"model", m.gpu->model},
                          {"memory_mib", m.gpu->memory_mib},
                          {"accepted", m.accepted},
                          {"credits_per_gpu_hour_micro", m.gpu->micro_per_gpu_hour},
                          {"max_micro", m.max_micro},
                          {"gpu_hours", m.gpu_hours()},
                          {"cloud", cloud}});
    }
    json out = {{"source", source},
                {"jobs", jobs.size()},
                {"cpu_only_max_micro", estimate.cpu_only_max_micro},
                {"models", models},
                {"prices_as_of", prices.as_of},
                {"pool", pool}};
    std::optional<std::string> pool_model;
    if (const auto reply = pool_part(pool); reply && !reply->jobs.empty()) {
        pool_model = reply->jobs.front().gpu_model;
    }
    // The model it would cost most on among those it accepts (or the pool's), and the cheapest that fits.
    if (auto c = credits::cheaper_model(estimate, jobs, rates, pool_model)) {
        out["cheaper"] = {{"model", c->cheapest->gpu->model},
                          {"max_micro", c->cheapest->max_micro},
                          {"instead_of", c->instead_of->gpu->model},
                          {"instead_of_max_micro", c->instead_of->max_micro},
                          {"restricted", c->restricted}};
    }
    return out;
}

json pool_estimate(const GlobalOptions& global, const std::string& source, const std::vector<recipe::JobSpec>& jobs,
                   std::string& why) {
    auto cfg = config::load_client_config(overrides(global));
    if (!cfg || cfg->token.empty()) {
        why = "no coordinator configured (set --url and --token for the pool's estimate and your balance)";
        return nullptr;
    }
    client::ApiClient api(*cfg);
    auto r = client::read_answer(api.post("/v1/estimate", {{"source", source}, {"jobs", recipe::to_wire_json(jobs)}}),
                                 "POST /v1/estimate", wire::estimate_reply_from_json);
    if (!r) {
        why = r.error().code == ErrorCode::invalid_input ? "no estimate from the pool: " + r.error().message
                                                         : "the pool's estimate is unavailable: " + r.error().message;
        return nullptr;
    }
    return wire::to_json(*r);
}

void print_price_estimate(const json& e) {
    const auto n = e["jobs"].get<std::size_t>();
    std::cout << "Estimated cost of " << e["source"].get<std::string>() << " (" << n << (n == 1 ? " job" : " jobs")
              << ", at most max_runtime each):\n";
    const json& models = e["models"];
    if (models.empty()) {
        std::cout << "  CPU only: at most " << money(e["cpu_only_max_micro"].get<Micro>()) << " credits\n";
    } else {
        std::vector<std::vector<std::string>> rows{
            {"GPU MODEL", "MEMORY", "CREDITS/GPU-H", "AT MOST (CREDITS)", "GPU-HOURS", ""}};
        for (const auto& m : models) {
            char hours[32];
            std::snprintf(hours, sizeof hours, "%.2f", m["gpu_hours"].get<double>());
            rows.push_back({m["model"].get<std::string>(),
                            resources::format_memory_mib(m["memory_mib"].get<std::int64_t>()),
                            money(m["credits_per_gpu_hour_micro"].get<Micro>()), money(m["max_micro"].get<Micro>()),
                            hours, m["accepted"].get<bool>() ? "" : "(not in gpu_models)"});
        }
        print_table(rows);
    }
    const auto pool = pool_part(e.value("pool", json()));
    if (pool && !pool->jobs.empty()) {
        const wire::JobCost& first = pool->jobs.front();
        const auto runs = first.history_runs;
        std::cout << "\nPool estimate: " << money(pool->total_estimate_micro) << " credits ("
                  << (runs > 0 ? "median runtime " + resources::format_duration_s(first.runtime_s) + " of " +
                                     std::to_string(runs) + " past successful runs"
                               : std::string("no history yet: max_runtime"))
                  << (first.gpu_model.empty() ? "" : ", on " + printable(first.gpu_model)) << "); at most "
                  << money(pool->total_max_micro) << " held.\n";
        std::cout << "Your team has " << money(pool->available_micro) << " credits available";
        if (pool->budget_room_micro) {
            std::cout << "; its budget allows " << money(std::max<Micro>(0, *pool->budget_room_micro)) << " more now";
        }
        std::cout << ".\n";
        if (pool->total_estimate_micro > pool->available_micro ||
            (pool->budget_room_micro && pool->total_estimate_micro > *pool->budget_room_micro)) {
            std::cout
                << "This is more than your team can pay now: submit would refuse it (--allow-unfunded queues it).\n";
        }
    } else if (e.contains("pool_note")) {
        std::cout << "\n(" << printable(e["pool_note"]) << ")\n";
    }
    if (e.contains("cheaper") && !e["cheaper"]["restricted"].get<bool>()) {
        const json& c = e["cheaper"];
        std::cout << "\nCheapest GPU that fits: " << c["model"].get<std::string>() << ", at most "
                  << money(c["max_micro"].get<Micro>())
                  << " credits (the priciest it may land on: " << c["instead_of"].get<std::string>() << ", "
                  << money(c["instead_of_max_micro"].get<Micro>()) << ").\n";
    } else if (e.contains("cheaper")) {
        const json& c = e["cheaper"];
        std::cout << "\nA cheaper GPU would do: " << c["model"].get<std::string>()
                  << " fits the jobs' memory and costs at most " << money(c["max_micro"].get<Micro>())
                  << " credits instead of " << money(c["instead_of_max_micro"].get<Micro>()) << " on "
                  << c["instead_of"].get<std::string>() << " (allow it in resources.gpu_models).\n";
    }
    std::vector<std::vector<std::string>> rows{{"GPU", "PROVIDER", "$/GPU-H", "COST", "DATE", "OFFERING"}};
    for (const auto& m : models) {
        if (!m["accepted"].get<bool>()) {
            continue;
        }
        for (const auto& c : m["cloud"]) {
            std::string rate = c["usd_per_gpu_hour"].get<std::string>();
            const auto dot = rate.find('.');
            rate += dot == std::string::npos ? ".00"
                                             : std::string(rate.size() - dot < 3 ? 3 - (rate.size() - dot) : 0, '0');
            rows.push_back({m["model"].get<std::string>(), c["provider"].get<std::string>(), "$" + rate,
                            dollars(c["micro_usd"].get<Micro>()), c["date"].get<std::string>(),
                            c["offering"].get<std::string>()});
        }
    }
    if (rows.size() > 1) {
        std::cout << "\nThe same GPU-hours on-demand in the cloud (prices as of "
                  << e["prices_as_of"].get<std::string>()
                  << " from data/prices.toml; refresh them before relying on them):\n";
        print_table(rows);
    }
}

json estimate_recipe(const GlobalOptions& global, const std::string& source, const std::vector<recipe::JobSpec>& jobs,
                     bool offline) {
    std::string why = "offline: the pool's estimate and your balance are not shown";
    json pool = offline ? json() : pool_estimate(global, source, jobs, why);
    json e = price_estimate(source, jobs, pool);
    if (pool.is_null()) {
        e["pool_note"] = why;
    }
    return e;
}

int run_price(const PriceOptions& opts) {
    const GlobalOptions& global = opts.global;
    auto loaded = load_recipe(global, opts.recipe);
    if (!loaded) {
        return k_exit_failed;
    }
    auto& [recipe, jobs] = *loaded;
    const auto sizing = size_recipe(global, opts.sizing, recipe, jobs, opts.offline);
    if (!sizing) {
        return k_exit_failed;
    }
    json e = estimate_recipe(global, recipe.source, jobs, opts.offline);
    if (!sizing->json.is_null()) {
        e["gpu_memory"] = sizing->json;
    }
    if (global.json) {
        std::cout << e.dump(2) << '\n';
    } else {
        print_sizing(*sizing, std::cout, true);
        print_price_estimate(e);
    }
    return k_exit_ok;
}

void register_price(Cli& cli) {
    auto opts = std::make_shared<PriceOptions>();
    CLI::App* sub = add_command(cli, "price", "Estimate a recipe's cost in credits and at cloud prices");
    add_help_footer(sub, "gpupool price eval.toml\ngpupool price eval.toml --offline --set resources.gpu_memory=40GiB",
                    "docs/credits.md (For researchers)", Reach::coordinator);
    add_recipe_args(sub, opts->recipe);
    sub->add_flag("--offline", opts->offline,
                  "Use the embedded catalogs only; do not ask the coordinator (nor the hub for models' config.json)");
    add_sizing_args(sub, opts->sizing);
    sub->callback([&cli, opts] {
        opts->global = cli.global;
        cli.exit_code = run_price(*opts);
    });
}

} // namespace gpupool::cmd

// The credit operations: what an admin grants, corrects and caps, and what the pool's members,
// owners and admins read of its money (a team's credits, the pool report, a worker's earnings,
// estimates, the history of shared recipes).
//
// Free functions over the Coordinator's components, not members of it. A write checks the caller,
// asks the CreditDesk (credit_desk.hpp) or the TokenBook to validate and stage its records, appends
// the audit record and commits through Coordinator::commit, the one way the pool's state changes:
// a refusal writes nothing, and a grant or an adjustment is durable once it returns. A read walks
// the components and changes nothing. Each runs on the coordinator's thread, as the Coordinator's
// own methods do. The rules of the ledger itself are core/credits/ledger.hpp's; docs/credits.md
// says what each number means to a team.
#pragma once

#include "core/coordinator/views.hpp"
#include "core/coordinator/worker_earnings.hpp"
#include "core/credits/ledger.hpp"
#include "core/recipe/recipe.hpp"
#include "core/store/records.hpp"
#include "core/util/result.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::coordinator {

class Coordinator;

// ---- an admin's writes (audited) ----
// Mints `amount` from the issuer into a team; at `expires_at` what is left of it (up to the
// team's positive balance) goes back to the issuer.
Result<store::GrantRecord> grant_credits(Coordinator& pool, const Principal& who, const std::string& team,
                                         std::int64_t amount_micro, std::optional<std::int64_t> expires_at,
                                         const std::string& note);
// A signed correction between the issuer and a team; the note is required.
Result<credits::Entry> adjust_credits(Coordinator& pool, const Principal& who, const std::string& team,
                                      std::int64_t amount_micro, const std::string& note);
// A team's spend caps over the last 24 hours and 7 days; nullopt removes one.
Status set_budget(Coordinator& pool, const Principal& who, const std::string& team,
                  std::optional<std::int64_t> day_micro, std::optional<std::int64_t> week_micro);
// Changes a team's caps, or one member's (caps within the team's: a member's jobs wait when either
// is spent). Returns the caps as they are afterwards (`label` set for a member).
Result<MemberBudget> change_budget(Coordinator& pool, const Principal& who, const BudgetChange& change);

// ---- reads ----
// A team's balance, holds, settling earnings, budgets and its newest `movements` ledger entries.
// Members and workers see their own team (a worker its owner's); admins name one (`team`).
Result<CreditsView> credits_of(const Coordinator& pool, const Principal& who, const std::optional<std::string>& team,
                               std::size_t movements = 20);
// Admin: every team's and every worker's credits and work since `since_ms`, and the pool's accounts.
Result<Report> pool_report(const Coordinator& pool, const Principal& who, std::int64_t since_ms);
// One worker's earnings for its owner (worker_earnings.hpp: the sums, the UTC periods, who reads).
Result<WorkerEarnings> worker_earnings(const Coordinator& pool, const Principal& who, WorkerId worker);
// What `jobs` would cost the caller's team (an admin names `team`): each job's price on the
// priciest GPU kind it may land on, its runtime from the recipe's history (`source`) or its
// max_runtime, against the team's balance and budgets and the caller's own. A job no worker can
// ever run is refused (invalid_input naming `jobs[i].resources`), as submit refuses it.
Result<Estimate> estimate_cost(const Coordinator& pool, const Principal& who, const std::string& source,
                               const std::vector<recipe::JobSpec>& jobs, const std::optional<std::string>& team);
// The history of shared-repository recipes (`gpupool recipe list`): for each (repo, recipe)
// asked about (the revision is ignored), the successful runs of jobs whose first origin is that
// recipe, with their median runtime and median cost; only these aggregates leave the
// coordinator. Whether a repository is public cannot be told from what a job records (its
// origin names the repository as the client configured it), so a member counts the runs of its
// own team, and every team's runs only for the repositories the pool names public
// (CoordinatorOptions::public_recipe_repos): another team's use of a private repository's recipe
// never shows. Admins count every team's runs. Members and admins only (the route checks).
std::vector<RecipeHistory> recipe_history(const Coordinator& pool, const Principal& who,
                                          const std::vector<recipe::Origin>& recipes);

namespace detail {
// The estimate of `jobs` for `team` (estimate_cost without the caller's checks and the workers'
// counts): what submit() and retry() weigh before they accept.
Estimate estimate_for(const Coordinator& pool, TeamId team, const std::string& source,
                      const std::vector<recipe::JobSpec>& jobs);
// Refuses `jobs` jobs estimated at `est` that the team (or the caller's own member budget) cannot
// fund (conflict, field `credits`, with the numbers and what to do); worded for a submission, or
// for a retry.
Status check_funded(const Coordinator& pool, const Principal& who, TeamId team, const Estimate& est, std::size_t jobs,
                    bool for_retry);
} // namespace detail

} // namespace gpupool::coordinator

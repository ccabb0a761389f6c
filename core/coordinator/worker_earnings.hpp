// What one worker has earned for its owner's team, summed on the coordinator from the credit ledger
// (`gpupool worker status`, GET /v1/workers/{id}/earnings in docs/api.md).
//
// Rules:
// - An attempt's earnings are its charges to the provider (to its team account or its settling
//   account) less what was refunded from the provider when the attempt was voided; the pool fee is
//   not the owner's. Each ledger entry names its attempt, and the attempt its worker, so the sums
//   are per worker, not per team.
// - Today and this week are UTC: today from 00:00 UTC, the week from Monday 00:00 UTC; an entry
//   counts in the period its own time falls in (a refund lowers the day it was made).
// - Who may read them: the worker itself, members of its team (the owner's) and admins; anyone else
//   is told there is no such worker (a member of another team, or another worker, cannot learn that
//   one exists); other roles (an enrollment token) are refused.
// The sums are computed on the coordinator's thread (worker_earnings in credit_ops.hpp). Pure helpers.
#pragma once

#include "core/util/ids.hpp"

#include <cstdint>
#include <string>

namespace gpupool::coordinator {

struct WorkerEarnings {
    WorkerId worker{};
    std::string name;
    TeamId team{};
    std::string team_name;
    std::int64_t day_start_ms = 0;  // 00:00 UTC today
    std::int64_t week_start_ms = 0; // Monday 00:00 UTC of this week
    std::int64_t today_micro = 0;
    std::int64_t week_micro = 0;
    std::int64_t total_micro = 0;    // all time
    std::int64_t settling_micro = 0; // of the total, still in the team's settling account
    std::int64_t attempts = 0;       // attempts that earned something
};

// 00:00 UTC of the day `now_ms` falls in, and Monday 00:00 UTC of its week (Unix ms).
std::int64_t utc_day_start_ms(std::int64_t now_ms);
std::int64_t utc_week_start_ms(std::int64_t now_ms);

} // namespace gpupool::coordinator

// Spot checks (issue 43, docs/evidence.md, "Spot-check replication"): the coordinator's side of the
// policy in verify/spot_check.hpp. A sampled share of succeeded results is run again on another
// owner's worker, the two results are compared by the job's `[verify]` rule (verify/compare.hpp),
// and each worker's record of agreeing decides its reliability score and its quarantine.
//
// How it runs, all of it staged in the transaction of the attempt's end that triggers it:
// - Sampling. When an attempt of an ordinary job succeeds on a worker another team owns, and the
//   pool checks (CoordinatorOptions::spot_checks.fraction > 0) and the job allows it (compare is not
//   "none"), it is sampled with verify::sample_probability of its worker's record. A sampled result
//   gets a check job: a new job of the same team (its inputs are the team's), in a sweep of its own,
//   with the same spec pinned to the image digest and model revisions the worker reported, marked
//   JobRecord::check_of. It never runs on the checked worker's owner's workers
//   (sched::JobRequest::avoid_owners), takes no hold, and the pool fee pays its provider
//   (CreditDesk::stage_check_pay); it does not count in its team's fair share.
// - Comparing. When a check job's attempt exits, its result (exit status, and the outputs listing and
//   JSON files the coordinator measured at upload: evidence kinds "outputs" and "values") is compared
//   with the checked attempt's. Agreement counts one agreement for both workers. A disagreement is
//   settled by a tie-break: a second check job, kept off both owners, whose result is compared with
//   both; the side it disagrees with gets the disagreement, the other two an agreement (it agrees
//   with neither: nobody is counted, the verdict is "undecided").
// - Quarantine. A worker whose record verify::quarantined() condemns is quarantined
//   (store::WorkerState::quarantined: no new work; its running attempts go on), with an audit entry
//   ("worker.quarantine") and a warning in the log. An admin activates it again or bans it
//   (`--void-since` refunds what it was paid for its results).
// - The verdict is kept as evidence (kind "check") on the checked attempt and on each check's own
//   attempt, and shown in their manifests.
// A check job that never exits (cancelled, lost too often, its image not found) gives no verdict.
// Runs on the coordinator's thread, as the operations beside it.
#pragma once

#include "core/api/run_report.hpp"
#include "core/store/store.hpp"
#include "core/verify/spot_check.hpp"

#include <cstdint>
#include <random>

namespace gpupool::coordinator {

class Coordinator;

inline constexpr const char* k_check_evidence = "check";   // a spot check's state and verdict
inline constexpr const char* k_values_evidence = "values"; // the outputs' small JSON files, by path

// The draws that decide which results are checked: seeded (CoordinatorOptions::spot_check_seed) or
// from std::random_device. Not durable: a restart draws afresh.
class SpotDraws {
public:
    explicit SpotDraws(std::uint64_t seed);
    bool draw(double probability); // true with `probability` (clamped to [0, 1])

private:
    std::mt19937_64 m_rng;
};

// After end_attempt staged `ended` (an attempt that exited, succeeded or not): samples it for a
// check, or, for an attempt of a check job, compares and stages the verdict (or a tie-break).
// `report`: the worker's run report on `ended`, staged in the same changes (the image digest and
// model revisions a check is pinned to). A failure to reserve ids or read evidence is logged and
// the check skipped: it never holds back the attempt's end.
void stage_spot_check(Coordinator& pool, const store::AttemptRecord& ended, const api::RunReport* report,
                      store::Changes& changes);

// The worker's record of checks as its store record keeps it.
inline verify::CheckRecord check_record(const store::WorkerRecord& w) {
    return {w.checks_agreed, w.checks_disagreed};
}

} // namespace gpupool::coordinator

#include "core/coordinator/spot_checks.hpp"

#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/internal.hpp"
#include "core/verify/compare.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace gpupool::coordinator {

using nlohmann::json;
using store::AttemptRecord;
using store::Changes;
using store::EvidenceRecord;
using store::JobRecord;
using store::WorkerRecord;
using store::WorkerState;

SpotDraws::SpotDraws(std::uint64_t seed) : m_rng(seed != 0 ? seed : std::random_device{}()) {}

bool SpotDraws::draw(double probability) {
    if (probability <= 0.0) {
        return false;
    }
    return std::uniform_real_distribution<double>(0.0, 1.0)(m_rng) < probability;
}

namespace {

std::string job_text(JobId id) {
    return "job " + std::to_string(id.value());
}
std::string attempt_text(AttemptId id) {
    return "attempt " + std::to_string(id.value());
}

// The worker's record as `c` will leave it: the copy staged already, else a new copy of the roster's.
WorkerRecord& staged_worker(const Coordinator& pool, WorkerId id, Changes& c) {
    for (auto it = c.workers.rbegin(); it != c.workers.rend(); ++it) {
        if (it->id == id) {
            return *it;
        }
    }
    c.workers.push_back(pool.roster().at(id).record);
    return c.workers.back();
}

// The evidence piece of `kind` staged for `attempt` in `c`, else stored; null when there is none.
json evidence_of(Coordinator& pool, AttemptId attempt, const std::string& kind, const Changes& c) {
    for (auto it = c.evidence.rbegin(); it != c.evidence.rend(); ++it) {
        if (it->attempt == attempt && it->kind == kind) {
            return json::parse(it->json, nullptr, false);
        }
    }
    auto stored = pool.blobs().evidence(attempt);
    if (!stored) {
        spdlog::warn("spot check: the evidence of {} could not be read: {}", attempt_text(attempt),
                     stored.error().message);
        return json();
    }
    for (const auto& e : *stored) {
        if (e.kind == kind) {
            return json::parse(e.json, nullptr, false);
        }
    }
    return json();
}

verify::RunResult result_of(Coordinator& pool, const AttemptRecord& a, const Changes& c) {
    verify::RunResult r;
    r.exit_code = a.exit_code;
    r.outputs = evidence_of(pool, a.id, "outputs", c);
    r.json_files = evidence_of(pool, a.id, k_values_evidence, c);
    return r;
}

void put_evidence(AttemptId attempt, const json& body, Changes& c) {
    c.evidence.push_back(EvidenceRecord{attempt, k_check_evidence, body.dump()});
}

// One more agreement or disagreement on the worker's record; quarantines it when its record
// condemns it now (an active worker only: a drained or banned one stays as the admin left it).
void count(Coordinator& pool, WorkerId worker, bool agreed, const std::string& about, Changes& c) {
    WorkerRecord& w = staged_worker(pool, worker, c);
    (agreed ? w.checks_agreed : w.checks_disagreed) += 1;
    const auto& policy = pool.options().spot_checks;
    const verify::CheckRecord record = check_record(w);
    if (agreed || w.state != WorkerState::active || !verify::quarantined(policy, record)) {
        return;
    }
    w.state = WorkerState::quarantined;
    const json detail{{"agreed", record.agreed},
                      {"disagreed", record.disagreed},
                      {"reliability", verify::reliability(record)},
                      {"forging_probability", verify::forging_probability(policy, record)},
                      {"check", about}};
    pool.audit(std::nullopt, "worker.quarantine", detail::worker_target(w), detail.dump(), c);
    spdlog::warn("{} quarantined: {} of its {} spot checks disagreed ({}); `gpupool admin activate` or "
                 "`gpupool admin ban` decides",
                 detail::worker_target(w), record.disagreed, record.checks(), about);
}

// The spec a check runs: the job's, pinned to what the checked worker reported it ran.
recipe::JobSpec check_spec(recipe::JobSpec spec, const api::RunReport* report) {
    if (report != nullptr && api::is_sha256_digest(report->image_digest)) {
        spec.image = spec.image.substr(0, spec.image.find('@')) + "@" + report->image_digest;
    }
    if (report != nullptr) {
        for (auto& model : spec.cache_models) {
            const std::string repo = model.substr(0, model.find('@'));
            for (const auto& m : report->models) {
                if (m.model.substr(0, m.model.find('@')) == repo && !m.revision.empty()) {
                    model = repo + "@" + m.revision;
                }
            }
        }
    }
    spec.retry.on_exit_codes.clear(); // its first exit is its result
    return spec;
}

// The worker's record as `c` will leave it, without staging anything.
const WorkerRecord& current_worker(const Coordinator& pool, WorkerId id, const Changes& c) {
    for (auto it = c.workers.rbegin(); it != c.workers.rend(); ++it) {
        if (it->id == id) {
            return *it;
        }
    }
    return pool.roster().at(id).record;
}

// Stages a check job of `checked` running `spec` (a tie-break when `against` is set).
std::optional<JobId> stage_check_job(Coordinator& pool, const AttemptRecord& checked, std::optional<AttemptId> against,
                                     recipe::JobSpec spec, Changes& c) {
    const JobRecord& job = pool.job_book().jobs().at(checked.job);
    auto sweep_id = pool.take_ids(store::IdKind::sweep, 1);
    auto job_id = sweep_id ? pool.take_ids(store::IdKind::job, 1) : Result<std::int64_t>(sweep_id.error());
    if (!job_id) {
        spdlog::error("spot check of {} skipped: no ids: {}", attempt_text(checked.id), job_id.error().message);
        return std::nullopt;
    }
    const std::int64_t now = pool.now_ms();
    const std::string what = (against ? "tie-break of the spot check of " : "spot check of ") + job_text(job.id) +
                             " (" + attempt_text(checked.id) + ")";
    const store::SweepRecord& original = pool.job_book().sweeps().at(job.sweep_id);
    c.sweeps.push_back(store::SweepRecord{SweepId(*sweep_id), job.team, original.submitter_token, what, 1, 0, now, {}});
    JobRecord j;
    j.id = JobId(*job_id);
    j.sweep_id = SweepId(*sweep_id);
    j.team = job.team;
    j.spec = std::move(spec);
    j.created_at = j.updated_at = now;
    j.reason = "queued: " + what;
    j.check_of = checked.id;
    j.check_against = against;
    c.jobs.push_back(std::move(j));
    return JobId(*job_id);
}

// A succeeded attempt of an ordinary job: sampled for a check?
void sample(Coordinator& pool, const AttemptRecord& a, const api::RunReport* report, Changes& c) {
    const auto& policy = pool.options().spot_checks;
    const JobRecord& job = pool.job_book().jobs().at(a.job);
    if (policy.fraction <= 0.0 || job.spec.verify.compare == recipe::CompareMode::none) {
        return;
    }
    const WorkerRecord& worker = current_worker(pool, a.worker, c);
    if (worker.team == job.team) {
        return; // a team's own worker: nobody else's result to doubt
    }
    if (!pool.spot_draws().draw(verify::sample_probability(policy, check_record(worker)))) {
        return;
    }
    if (auto check = stage_check_job(pool, a, std::nullopt, check_spec(job.spec, report), c)) {
        put_evidence(a.id, {{"status", "pending"}, {"jobs", {check->value()}}}, c);
    }
}

// The checked attempt's "check" evidence with `status` and `detail`, keeping the jobs it names.
void set_status(Coordinator& pool, AttemptId checked, const std::string& status, const std::string& detail, JobId check,
                Changes& c) {
    json body = evidence_of(pool, checked, k_check_evidence, c);
    if (!body.is_object()) {
        body = json::object();
    }
    json jobs = body.value("jobs", json::array());
    if (!jobs.is_array()) {
        jobs = json::array();
    }
    if (std::find(jobs.begin(), jobs.end(), json(check.value())) == jobs.end()) {
        jobs.push_back(check.value());
    }
    body["jobs"] = std::move(jobs);
    body["status"] = status;
    body["detail"] = detail;
    put_evidence(checked, body, c);
}

// An attempt of a check job exited: compare, and stage the verdict or a tie-break.
void settle(Coordinator& pool, const AttemptRecord& ran, const JobRecord& check, Changes& c) {
    const auto& book = pool.job_book();
    const AttemptRecord& checked = book.attempts().at(*check.check_of);
    const recipe::Verify& rule = book.jobs().at(checked.job).spec.verify;
    const verify::RunResult mine = result_of(pool, ran, c);
    const verify::RunResult theirs = result_of(pool, checked, c);
    const std::string about = "spot check " + job_text(check.id) + " of " + attempt_text(checked.id);
    if (!check.check_against) {
        const verify::Comparison cmp = verify::compare_results(rule, theirs, mine);
        if (cmp.agree) {
            count(pool, checked.worker, true, about, c);
            count(pool, ran.worker, true, about, c);
            set_status(pool, checked.id, "agreed", cmp.detail, check.id, c);
            put_evidence(ran.id, {{"checks", checked.id.value()}, {"status", "agreed"}, {"detail", cmp.detail}}, c);
            return;
        }
        // Who is wrong is for a third owner's worker to say.
        const auto tie = stage_check_job(pool, checked, ran.id, check.spec, c);
        set_status(pool, checked.id, "disputed", cmp.detail, check.id, c);
        if (tie) {
            set_status(pool, checked.id, "disputed", cmp.detail, *tie, c);
        }
        put_evidence(ran.id, {{"checks", checked.id.value()}, {"status", "disputed"}, {"detail", cmp.detail}}, c);
        return;
    }
    const AttemptRecord& first = book.attempts().at(*check.check_against);
    const verify::RunResult firsts = result_of(pool, first, c);
    const verify::Comparison with_checked = verify::compare_results(rule, theirs, mine);
    const verify::Comparison with_first = verify::compare_results(rule, firsts, mine);
    std::string status;
    std::string detail;
    if (with_checked.agree == with_first.agree) {
        // Both or neither: no majority against either side. Both agreeing (tolerance is not
        // transitive) counts for everyone; neither counts for nobody.
        status = with_checked.agree ? "agreed" : "undecided";
        detail = with_checked.agree ? "the tie-break agrees with both: " + with_checked.detail
                                    : "the tie-break agrees with neither: " + with_checked.detail;
        if (with_checked.agree) {
            for (WorkerId w : {checked.worker, first.worker, ran.worker}) {
                count(pool, w, true, about, c);
            }
        }
    } else {
        const bool checked_right = with_checked.agree;
        status = checked_right ? "agreed" : "disagreed";
        detail = checked_right ? "the tie-break agrees with it; the first check differed: " + with_first.detail
                               : "the tie-break agrees with the first check: " + with_checked.detail;
        count(pool, ran.worker, true, about, c);
        count(pool, checked_right ? checked.worker : first.worker, true, about, c);
        count(pool, checked_right ? first.worker : checked.worker, false, about, c);
    }
    set_status(pool, checked.id, status, detail, check.id, c);
    put_evidence(ran.id, {{"checks", checked.id.value()}, {"status", status}, {"detail", detail}}, c);
}

} // namespace

void stage_spot_check(Coordinator& pool, const AttemptRecord& ended, const api::RunReport* report, Changes& c) {
    const JobRecord& job = pool.job_book().jobs().at(ended.job);
    if (job.is_check()) {
        if (ended.exit_code) {
            settle(pool, ended, job, c);
        }
        return;
    }
    if (ended.state == store::AttemptState::succeeded) {
        sample(pool, ended, report, c);
    }
}

} // namespace gpupool::coordinator

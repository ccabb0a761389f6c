#include "core/coordinator/spot_checks.hpp"

#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/evidence.hpp"
#include "core/coordinator/internal.hpp"
#include "core/recipe/field_rules.hpp"
#include "core/verify/compare.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <string_view>
#include <vector>

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

// The worker's record staged in `c`, if it is.
WorkerRecord* staged(Changes& c, WorkerId id) {
    for (auto it = c.workers.rbegin(); it != c.workers.rend(); ++it) {
        if (it->id == id) {
            return &*it;
        }
    }
    return nullptr;
}

// The worker's record as `c` will leave it, without staging anything.
const WorkerRecord& current_worker(const Coordinator& pool, WorkerId id, Changes& c) {
    const WorkerRecord* w = staged(c, id);
    return w != nullptr ? *w : pool.roster().at(id).record;
}

// The worker's record as `c` will leave it, staged for a change: the copy staged already, else a new
// copy of the roster's.
WorkerRecord& staged_worker(const Coordinator& pool, WorkerId id, Changes& c) {
    if (WorkerRecord* w = staged(c, id)) {
        return *w;
    }
    c.workers.push_back(pool.roster().at(id).record);
    return c.workers.back();
}

// The evidence a verdict reads: what `c` stages over what the store holds, each attempt's read from
// the store once (a verdict reads the checked attempt's several times).
class EvidenceReader {
public:
    EvidenceReader(Coordinator& pool, const Changes& c) : m_pool(pool), m_changes(c) {}

    // The piece of `kind` for `attempt`; null when there is none.
    json piece(AttemptId attempt, std::string_view kind) {
        for (auto it = m_changes.evidence.rbegin(); it != m_changes.evidence.rend(); ++it) {
            if (it->attempt == attempt && it->kind == kind) {
                return json::parse(it->json, nullptr, false);
            }
        }
        auto [at, fresh] = m_stored.try_emplace(attempt);
        if (fresh) {
            if (auto stored = m_pool.blobs().evidence(attempt)) {
                at->second = std::move(*stored);
            } else {
                spdlog::warn("spot check: the evidence of {} could not be read: {}", attempt_text(attempt),
                             stored.error().message);
            }
        }
        return evidence_piece(at->second, kind);
    }

    verify::RunResult result_of(const AttemptRecord& a) {
        return {a.exit_code, piece(a.id, "outputs"), piece(a.id, k_values_evidence)};
    }

private:
    Coordinator& m_pool;
    const Changes& m_changes;
    std::map<AttemptId, std::vector<EvidenceRecord>> m_stored;
};

// A verdict's detail names output paths, the job's bytes (compare.cpp escapes what is not UTF-8; a
// slip there is replaced here, never a throw on the coordinator's thread).
void put_evidence(AttemptId attempt, const json& body, Changes& c) {
    c.evidence.push_back(
        EvidenceRecord{attempt, k_check_evidence, body.dump(-1, ' ', false, json::error_handler_t::replace)});
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
        spec.image = recipe::pinned_image(spec.image, report->image_digest);
    }
    const std::vector<api::MountedModel> none;
    for (auto& model : spec.cache_models) {
        for (const auto& m : report != nullptr ? report->models : none) {
            if (!m.revision.empty() && recipe::model_repo(m.model) == recipe::model_repo(model)) {
                model = recipe::pinned_model(model, m.revision);
            }
        }
    }
    spec.retry.on_exit_codes.clear(); // its first exit is its result
    return spec;
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
void set_status(EvidenceReader& evidence, AttemptId checked, const std::string& status, const std::string& detail,
                JobId check, Changes& c) {
    json body = evidence.piece(checked, k_check_evidence);
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
    EvidenceReader evidence(pool, c);
    const verify::RunResult mine = evidence.result_of(ran);
    const verify::RunResult theirs = evidence.result_of(checked);
    const std::string about = "spot check " + job_text(check.id) + " of " + attempt_text(checked.id);
    if (!check.check_against) {
        const verify::Comparison cmp = verify::compare_results(rule, theirs, mine);
        if (cmp.agree) {
            count(pool, checked.worker, true, about, c);
            count(pool, ran.worker, true, about, c);
            set_status(evidence, checked.id, "agreed", cmp.detail, check.id, c);
            put_evidence(ran.id, {{"checks", checked.id.value()}, {"status", "agreed"}, {"detail", cmp.detail}}, c);
            return;
        }
        // Who is wrong is for a third owner's worker to say.
        const auto tie = stage_check_job(pool, checked, ran.id, check.spec, c);
        set_status(evidence, checked.id, "disputed", cmp.detail, check.id, c);
        if (tie) {
            set_status(evidence, checked.id, "disputed", cmp.detail, *tie, c);
        }
        put_evidence(ran.id, {{"checks", checked.id.value()}, {"status", "disputed"}, {"detail", cmp.detail}}, c);
        return;
    }
    const AttemptRecord& first = book.attempts().at(*check.check_against);
    const verify::RunResult firsts = evidence.result_of(first);
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
    set_status(evidence, checked.id, status, detail, check.id, c);
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

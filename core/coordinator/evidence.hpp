// Evidence (issue 43, docs/evidence.md): what the coordinator keeps of each attempt beside its
// record, and the manifest it joins from it.
//
// Two pieces come in as the attempt runs, each stored with the attempt (store::EvidenceRecord, read
// back one attempt at a time, never held in memory):
// - "outputs": the listing of the outputs archive the coordinator received (archive/listing.hpp),
//   each file's size and SHA-256, measured here from the archive the researcher will fetch;
// - "run": what the worker says it ran (api::RunReport), committed with the attempt's end.
// The manifest joins them with what the coordinator knows itself: the job's spec (image reference,
// command, environment with secret-looking values replaced by their digest, sweep parameters,
// inputs digest, the recipe's digest and origins, models), the attempt (worker, GPU share, times,
// exit) and the worker (owner team, name). What nobody said is listed under `unknown`, never made up.
// Runs on the coordinator's thread, like the operations beside it.
#pragma once

#include "core/api/run_report.hpp"
#include "core/coordinator/token_book.hpp"
#include "core/coordinator/views.hpp"
#include "core/store/store.hpp"

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string_view>
#include <vector>

namespace gpupool::coordinator {

class Coordinator;

inline constexpr int k_manifest_version = 1;

// Adds the worker's report on `attempt` to `changes` (kind "run").
void stage_run_report(AttemptId attempt, const api::RunReport& report, store::Changes& changes);
// Stores the listing of the outputs archive a worker uploaded for `attempt` (kind "outputs"), with
// the archive's digest and size; an archive that cannot be listed is recorded with why.
Status record_outputs(Coordinator& pool, AttemptId attempt, const UploadedFile& file);

// The manifest of one attempt of a job `who` may see: `attempt`, else the job's latest (the one
// whose outputs `fetch` returns). not_found for a job without attempts or an attempt of another job.
Result<nlohmann::json> job_manifest(Coordinator& pool, const Principal& who, JobId job,
                                    std::optional<AttemptId> attempt = std::nullopt);

// The piece of `kind` among one attempt's `evidence`, parsed; null when there is none (or it does not
// parse: the store's own text, so only a damaged database).
nlohmann::json evidence_piece(const std::vector<store::EvidenceRecord>& evidence, std::string_view kind);

// Whether an environment variable's name looks like it holds a secret (TOKEN, SECRET, PASSWORD,
// PASSWD, API_KEY, PRIVATE_KEY, CREDENTIAL in any case): the manifest shows such a value's SHA-256.
bool secret_looking(std::string_view name);

} // namespace gpupool::coordinator

// WorkerRoster on its own: absorbed records, the counts behind estimates and feasibility, presence,
// what heartbeats say (not durable, so never a difference from a rebuild), owners' terms naming
// teams, and model-weight downloads.
#include "core/coordinator/worker_roster.hpp"

#include <catch2/catch.hpp>

namespace gpupool::coordinator::test_worker_roster {
namespace {

using store::WorkerState;

api::Inventory box(std::vector<std::pair<std::string, std::int64_t>> gpus, std::int64_t cpu_milli = 8000,
                   std::int64_t memory_mib = 32768) {
    api::Inventory inv;
    inv.cpu_milli = cpu_milli;
    inv.memory_mib = memory_mib;
    for (const auto& [model, mib] : gpus) {
        inv.gpus.push_back({static_cast<std::int64_t>(inv.gpus.size()), model, mib, "", ""});
    }
    return inv;
}

store::WorkerRecord worker(std::int64_t id, const api::Inventory& inv, std::int64_t seen = 1'000,
                           std::optional<TokenId> enrolled_by = std::nullopt) {
    return {WorkerId(id), TeamId(2),  "w" + std::to_string(id), api::to_text(inv), WorkerState::active, 0,
            seen,         enrolled_by};
}

TokenBook teams_book() {
    TokenBook book;
    store::Changes c;
    c.teams = {{TeamId(1), "fellows", 1, 0, std::nullopt, std::nullopt},
               {TeamId(2), "owners", 1, 0, std::nullopt, std::nullopt}};
    book.absorb(c);
    return book;
}

const credits::RateCatalog& rates() {
    return credits::default_rate_catalog();
}

} // namespace

TEST_CASE("worker roster: absorbed workers are counted by GPU kind, CPU and memory, banned ones not",
          "[coordinator][components][roster]") {
    const TokenBook teams = teams_book();
    WorkerRoster roster({10'000, false}, rates());
    CHECK(roster.empty());
    CHECK(roster.largest_cpu_milli() == 0);
    store::Changes c;
    c.workers = {worker(1, box({{"NVIDIA L4", 24576}, {"NVIDIA L4", 24576}}, 4000, 16384)),
                 worker(2, box({{"NVIDIA H100", 81920}}, 16000, 65536))};
    CHECK(roster.absorb(c, teams) == std::vector<WorkerId>{WorkerId(1), WorkerId(2)});
    CHECK(roster.largest_cpu_milli() == 16000);
    CHECK(roster.largest_memory_mib() == 65536);
    REQUIRE(roster.gpu_kinds().size() == 2);
    CHECK(roster.gpu_kinds().at({"NVIDIA L4", 24576}).gpus == 2);
    CHECK(roster.gpu_kinds().at({"NVIDIA L4", 24576}).rate == rates().gpu_rate("NVIDIA L4"));
    CHECK(roster.at(WorkerId(1)).gpus.size() == 2);
    store::Changes ban;
    ban.workers = {worker(2, box({{"NVIDIA H100", 81920}}, 16000, 65536))};
    ban.workers[0].state = WorkerState::banned;
    roster.absorb(ban, teams);
    CHECK(roster.banned(WorkerId(2)));
    CHECK_FALSE(roster.banned(WorkerId(1)));
    CHECK_FALSE(roster.banned(WorkerId(9)));
    CHECK(roster.largest_cpu_milli() == 4000);
    CHECK(roster.gpu_kinds().count({"NVIDIA H100", 81920}) == 0);
    CHECK(roster.presence(WorkerId(2), 1'000) == "banned");
}

TEST_CASE("worker roster: presence follows the last heartbeat and the owner's word",
          "[coordinator][components][roster]") {
    const TokenBook teams = teams_book();
    WorkerRoster roster({10'000, false}, rates());
    store::Changes c;
    c.workers = {worker(1, box({{"NVIDIA L4", 24576}}), 1'000)};
    roster.absorb(c, teams);
    CHECK(roster.presence(WorkerId(1), 5'000) == "online");
    CHECK(roster.presence(WorkerId(1), 11'001) == "offline");
    api::Heartbeat beat;
    beat.sharing = api::SharingState::paused;
    CHECK(roster.note_heartbeat(WorkerId(1), beat, nullptr, 5'000, teams)); // a pass may decide otherwise now
    CHECK(roster.presence(WorkerId(1), 5'000) == "paused");
    CHECK_FALSE(roster.note_heartbeat(WorkerId(1), beat, nullptr, 5'000, teams)); // the same again: nothing new
    beat.sharing = api::SharingState::sharing;
    beat.draining = true;
    CHECK(roster.note_heartbeat(WorkerId(1), beat, nullptr, 5'000, teams));
    CHECK(roster.presence(WorkerId(1), 5'000) == "draining");
    // A restore from a backup after its last heartbeat: offline until it reports in.
    WorkerRoster restored({10'000, false}, rates());
    restored.set_restored_at(2'000);
    restored.absorb(c, teams);
    CHECK(restored.at(WorkerId(1)).unconfirmed);
    CHECK(restored.presence(WorkerId(1), 1'500) == "offline");
}

TEST_CASE("worker roster: owners' terms name teams, resolved again when a team is made",
          "[coordinator][components][roster]") {
    TokenBook teams = teams_book();
    WorkerRoster roster({10'000, false}, rates());
    store::Changes c;
    c.workers = {worker(1, box({{"NVIDIA L4", 24576}})), worker(2, box({}))};
    roster.absorb(c, teams);
    api::OwnerTerms terms;
    terms.teams = {"owners", "interp"};
    roster.set_terms(WorkerId(1), terms, teams);
    REQUIRE(roster.at(WorkerId(1)).placement_terms.has_value());
    CHECK(roster.at(WorkerId(1)).placement_terms->teams == std::vector<TeamId>{TeamId(2)});
    store::Changes made;
    made.teams = {{TeamId(3), "interp", 1, 0, std::nullopt, std::nullopt}};
    teams.absorb(made);
    // Only the worker whose terms name teams changes.
    CHECK(roster.absorb(made, teams) == std::vector<WorkerId>{WorkerId(1)});
    CHECK(roster.at(WorkerId(1)).placement_terms->teams == std::vector<TeamId>{TeamId(2), TeamId(3)});
}

TEST_CASE("worker roster: what heartbeats say is no difference from a rebuild, a record is",
          "[coordinator][components][roster]") {
    const TokenBook teams = teams_book();
    WorkerRoster kept({10'000, false}, rates());
    store::Changes c;
    c.workers = {worker(1, box({{"NVIDIA L4", 24576}}), 1'000, TokenId(5)),
                 worker(2, box({{"NVIDIA L4", 24576}}), 1'000, TokenId(5)), worker(3, box({}))};
    kept.absorb(c, teams);
    api::Heartbeat beat;
    beat.unhealthy_gpus = {0};
    beat.gpu_memory_used_mib = {100};
    kept.note_heartbeat(WorkerId(1), beat, nullptr, 2'000, teams);
    kept.note_fetching(WorkerId(1), {{AttemptId(7), 5, 10}, {AttemptId(8), 1, 0}}, {AttemptId(7)});
    WorkerRoster rebuilt({10'000, false}, rates());
    rebuilt.absorb(c, teams);
    CHECK_FALSE(kept.first_difference(rebuilt).has_value());
    CHECK(kept.at(WorkerId(1)).gpu_memory_used_mib == std::vector<std::int64_t>{100});
    CHECK(kept.enrolled_with(WorkerId(1)) == std::vector<WorkerId>{WorkerId(2)});
    CHECK(kept.enrolled_with(WorkerId(3)).empty());
    // Downloads: only assigned attempts are kept; a start forgets its attempt's.
    REQUIRE(kept.fetching(WorkerId(1), AttemptId(7)) != nullptr);
    CHECK(kept.fetching(WorkerId(1), AttemptId(7))->done_bytes == 5);
    CHECK(kept.fetching(WorkerId(1), AttemptId(8)) == nullptr);
    kept.forget_fetching(WorkerId(1), AttemptId(7));
    CHECK(kept.fetching(WorkerId(1), AttemptId(7)) == nullptr);
    store::Changes seen;
    seen.workers = {worker(3, box({}), 5'000)};
    kept.absorb(seen, teams);
    CHECK(kept.first_difference(rebuilt) == "worker 3 differs");
    store::Changes extra;
    extra.workers = {worker(4, box({}))};
    rebuilt.absorb(extra, teams);
    CHECK(kept.first_difference(rebuilt).value().find("worker ") == 0);
}

TEST_CASE("worker roster: a GPU whose memory is not its model's is named, with the catalog's",
          "[coordinator][components][roster]") {
    WorkerRoster roster({10'000, false}, rates());
    const auto warnings = roster.inventory_warnings(box({{"H100", 24576}, {"TPU v9", 1024}}));
    REQUIRE(warnings.size() == 2);
    CHECK(warnings[0].find("`TPU v9` is not in the GPU catalog") != std::string::npos);
    CHECK(warnings[1].find("GPU 0 `H100` with 24") != std::string::npos);
    CHECK(warnings[1].find("the catalog's H100-80GB") != std::string::npos);
    CHECK(roster.model_mismatch_of(box({{"NVIDIA L4", 24576}})).empty());
}

TEST_CASE("worker roster: whether a request could ever run, and why nothing is placed",
          "[coordinator][components][roster]") {
    const TokenBook teams = teams_book();
    WorkerRoster roster({10'000, false}, rates());
    recipe::Resources big_gpu;
    big_gpu.gpus = 1;
    big_gpu.gpu_memory_mib = 40'000;
    CHECK_FALSE(roster.infeasible_reason(big_gpu)); // an empty pool may still be filling up
    CHECK(roster.no_worker_reason(1'000) == "no worker is connected to the pool");
    store::Changes c;
    c.workers = {worker(1, box({{"NVIDIA L4", 24576}}, 4000, 16384), 1'000)};
    roster.absorb(c, teams);
    // needs: GPU memory 40000 MiB > 24576; CPUs 8 > 4; memory 64 GiB > 16 GiB; a model no worker has
    CHECK_THAT(*roster.infeasible_reason(big_gpu), Catch::Contains("of GPU memory; the largest GPU has 24GiB"));
    recipe::Resources cpus;
    cpus.cpu_milli = 8000;
    CHECK_THAT(*roster.infeasible_reason(cpus), Catch::Contains("the largest worker has 4"));
    recipe::Resources memory;
    memory.memory_mib = 65536;
    CHECK_THAT(*roster.infeasible_reason(memory), Catch::Contains("of memory; the largest worker has 16GiB"));
    recipe::Resources model;
    model.gpus = 1;
    model.gpu_models = {"NVIDIA H100"};
    CHECK(*roster.infeasible_reason(model) == "no worker has a GPU of the models it accepts");
    recipe::Resources fits;
    fits.gpus = 1;
    fits.gpu_memory_mib = 20'000;
    fits.cpu_milli = 2000;
    CHECK_FALSE(roster.infeasible_reason(fits));
    // Paused by its owner until 3,601 s: why nothing is placed says so, and when it shares again.
    api::Heartbeat beat;
    beat.sharing = api::SharingState::paused;
    beat.sharing_changes_at_ms = 3'601'000;
    roster.note_heartbeat(WorkerId(1), beat, nullptr, 1'000, teams);
    CHECK(roster.no_worker_reason(1'000) ==
          "no worker is taking work: 1 is paused by its owner (the first shares again in 1h)");
    // Banned: nothing could ever run, and it is said as it is.
    store::Changes ban;
    ban.workers = {worker(1, box({{"NVIDIA L4", 24576}}, 4000, 16384), 1'000)};
    ban.workers[0].state = WorkerState::banned;
    roster.absorb(ban, teams);
    CHECK(*roster.infeasible_reason(fits) == "no worker is connected to the pool (every worker that joined it is banned)");
}

TEST_CASE("worker roster: an attempt's price is its GPU model's rate for its share, or CPU time",
          "[coordinator][components][roster]") {
    const TokenBook teams = teams_book();
    WorkerRoster roster({10'000, false}, rates());
    store::Changes c;
    c.workers = {worker(1, box({{"NVIDIA L4", 24576}, {"NVIDIA H100", 81920}}), 1'000)};
    roster.absorb(c, teams);
    recipe::Resources r;
    r.gpus = 1;
    r.cpu_milli = 1000;
    const credits::Micro core = rates().cpu_micro_per_core_hour;
    // On GPU 1 (an H100), half of it: the same rule the scheduler's holds use.
    CHECK(roster.attempt_price(r, WorkerId(1), 1, 500) ==
          credits::attempt_price_per_hour({1, 500, 0, 1000}, credits::PricedGpu{rates().gpu_rate("NVIDIA H100"), 81920},
                                          core));
    CHECK(roster.attempt_price(r, WorkerId(1), 1, 500) > roster.attempt_price(r, WorkerId(1), 0, 500));
    // CPU only (-1): the CPU rate alone.
    recipe::Resources cpu_only;
    cpu_only.cpu_milli = 2000;
    CHECK(roster.attempt_price(cpu_only, WorkerId(1), -1, 0) == credits::cpu_price_per_hour(core, 2000));
}

} // namespace gpupool::coordinator::test_worker_roster

#include "core/sched/placement.hpp"
#include "tests/core/sched/fixtures.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_filters {

using namespace gpupool::sched;
using namespace gpupool::sched::test;

TEST_CASE("filter: available excludes lost and draining workers") {
    Worker w = worker(1, {1000});
    CHECK(filter_available(w));
    w.health = WorkerHealth::degraded;
    CHECK(filter_available(w));
    w.health = WorkerHealth::lost;
    CHECK_FALSE(filter_available(w));
    w.health = WorkerHealth::healthy;
    w.draining = true;
    CHECK_FALSE(filter_available(w));
}

TEST_CASE("filter: gpu needs the share free on ONE GPU") {
    Worker w = worker(1, {300, 300}); // 0.6 free in all, but split
    CHECK(filter_gpu(w, share_job(1, 300)));
    CHECK_FALSE(filter_gpu(w, share_job(2, 500)));
    CHECK(filter_gpu(w, cpu_job(3, 1000))); // no GPU asked
}

TEST_CASE("filter: gpu needs n completely free GPUs for whole-GPU jobs") {
    Worker w = worker(1, {1000, 999, 1000});
    CHECK(filter_gpu(w, whole_job(1, 2)));
    CHECK_FALSE(filter_gpu(w, whole_job(2, 3)));
}

TEST_CASE("filter: gpu converts memory requests with the GPU's own memory, rounding up") {
    Worker w = worker(1, {500}, 32000, 131072, 0, 24576); // half of a 24 GiB GPU free = 12 GiB
    JobRequest j = share_job(1, 0);
    j.gpu_memory_mib = 12288;
    CHECK(milli_on(j, w.gpus[0]) == 500);
    CHECK(filter_gpu(w, j));
    j.gpu_memory_mib = 12289; // 500.04 milli rounds up to 501
    CHECK(milli_on(j, w.gpus[0]) == 501);
    CHECK_FALSE(filter_gpu(w, j));
}

TEST_CASE("filter: cpu and memory") {
    Worker w = worker(1, {1000}, 4000, 8192);
    CHECK(filter_cpu(w, share_job(1, 100, 4000)));
    CHECK_FALSE(filter_cpu(w, share_job(2, 100, 4001)));
    CHECK(filter_memory(w, share_job(3, 100, 1000, 8192)));
    CHECK_FALSE(filter_memory(w, share_job(4, 100, 1000, 8193)));
}

TEST_CASE("filter: models") {
    ModelCatalog models;
    const auto a100 = models.intern("A100");
    const auto t4 = models.intern("T4");
    Worker w = worker(1, {1000, 1000}, 32000, 131072, t4);
    JobRequest j = whole_job(1, 1);
    j.gpu_models = models.mask({"A100"});
    CHECK_FALSE(filter_models(w, j));
    j.gpu_models = models.mask({"A100", "T4"});
    CHECK(filter_models(w, j));
    CHECK(a100 != t4);
    std::vector<std::string> unknown;
    CHECK(models.mask({"H100"}, &unknown) == 0);
    CHECK(unknown == std::vector<std::string>{"H100"});
}

TEST_CASE("filter: owner policy hook") {
    Worker w = worker(1, {1000});
    OwnerPolicy only_team_7 = [](const Worker&, const JobRequest& j) { return j.team == TeamId(7); };
    JobRequest j = share_job(1, 100);
    CHECK(filter_owner(w, j, {}));
    CHECK_FALSE(filter_owner(w, j, only_team_7));
    j.team = TeamId(7);
    CHECK(filter_owner(w, j, only_team_7));
    CHECK(passes_filters(w, j, only_team_7));
}

TEST_CASE("filter: a job kept off an owner never runs on that owner's workers, whichever they are") {
    Worker mine = worker(1, {1000});
    mine.owner = gpupool::TeamId(7);
    Worker other = worker(2, {1000});
    other.owner = gpupool::TeamId(8);
    JobRequest check = share_job(1, 500);
    check.avoid_owners = {gpupool::TeamId(7)};
    CHECK_FALSE(filter_avoid(mine, check, 0));
    CHECK(filter_avoid(other, check, 0));
    CHECK_FALSE(passes_filters(mine, check, OwnerPolicy{}, 0));
    check.avoid_owners.push_back(gpupool::TeamId(8)); // a tie-break: off both owners
    CHECK_FALSE(filter_avoid(other, check, 0));
    CHECK(filter_avoid(mine, share_job(2, 500), 0)); // an ordinary job goes anywhere
}

TEST_CASE("fits_total ignores what is in use") {
    Worker w = worker(1, {0, 0}, 0, 0); // everything taken
    CHECK(fits_total(w, whole_job(1, 2, 32000, 131072)));
    CHECK_FALSE(fits_total(w, whole_job(2, 3)));
    CHECK_FALSE(fits_total(w, share_job(3, 100, 32001)));
}

TEST_CASE("filter: an owner's terms keep jobs of other teams, registries and longer runtimes off the worker") {
    Worker w = worker(1, {1000});
    JobRequest j = share_job(1, 100); // team 1
    j.image = "ubuntu:22.04";
    j.qualified_image = "docker.io/library/ubuntu:22.04";
    j.max_runtime_s = 3600;
    CHECK(filter_owner(w, j, {}));
    w.terms = WorkerTerms{};
    CHECK(refused_by(*w.terms, j) == TermsRefusal::none); // empty terms: anything

    w.terms->teams = std::vector<TeamId>{TeamId(2), TeamId(5)};
    CHECK(refused_by(*w.terms, j) == TermsRefusal::team);
    CHECK_FALSE(filter_owner(w, j, {}));
    CHECK_FALSE(passes_filters(w, j, {}));
    j.team = TeamId(5);
    CHECK(filter_owner(w, j, {}));
    w.terms->teams = std::vector<TeamId>{}; // the owner named only teams that do not exist
    CHECK(refused_by(*w.terms, j) == TermsRefusal::team);
    w.terms->teams.reset();

    w.terms->registries = {"ghcr.io/"};
    CHECK(refused_by(*w.terms, j) == TermsRefusal::registry);
    w.terms->registries = {"ghcr.io/", "docker.io/library/"};
    CHECK(refused_by(*w.terms, j) == TermsRefusal::none);

    w.terms->max_runtime_s = 1800;
    CHECK(refused_by(*w.terms, j) == TermsRefusal::max_runtime);
    j.max_runtime_s = 1800;
    CHECK(refused_by(*w.terms, j) == TermsRefusal::none);
    j.max_runtime_s = 0; // no limit: more than any limit
    CHECK(refused_by(*w.terms, j) == TermsRefusal::max_runtime);
    CHECK_FALSE(filter_owner(w, j, {}));
}

TEST_CASE("make_request spells out the image's registry for the owners' terms") {
    gpupool::recipe::JobSpec spec;
    spec.image = "me/eval:1";
    CHECK(make_request(JobId(1), TeamId(1), spec, 0, ModelCatalog{}).qualified_image == "docker.io/me/eval:1");
    spec.image = "ghcr.io/org/x@sha256:" + std::string(64, 'a');
    CHECK(make_request(JobId(1), TeamId(1), spec, 0, ModelCatalog{}).qualified_image == spec.image);
}

TEST_CASE("filter: a GPU whose shares nothing enforces takes whole-GPU jobs only, when the pool says so") {
    Worker w = worker(1, {1000, 1000});
    w.gpus[0].fractional_ok = false;
    w.gpus[1].fractional_ok = false;
    CHECK_FALSE(filter_gpu(w, share_job(1, 250)));
    CHECK(filter_gpu(w, whole_job(2, 1)));
    w.gpus[1].fractional_ok = true; // the other GPU is watched: the share goes there
    CHECK(filter_gpu(w, share_job(3, 250)));
}

} // namespace test_filters
} // namespace

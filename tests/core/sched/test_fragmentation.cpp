#include "core/sched/fragmentation.hpp"
#include "core/sched/rng.hpp"
#include "tests/core/sched/fixtures.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_fragmentation {

using namespace gpupool::sched;
using namespace gpupool::sched::test;

namespace {

Workload two_types() {
    // Half the tasks want 0.5 GPU and 2 CPUs, half want a whole GPU and 4 CPUs.
    Workload w;
    w.types = {WorkloadType{2000, 1, 500, 0, 1}, WorkloadType{4000, 1, 1000, 0, 1}};
    w.total_count = 2;
    return w;
}

} // namespace

TEST_CASE("a type's fragment is the free share it cannot use") {
    std::array<GpuSlot, 3> gpus{GpuSlot{0, 1000}, GpuSlot{0, 300}, GpuSlot{0, 600}};
    const WorkloadType half{2000, 1, 500, 0, 1};
    const WorkloadType whole{4000, 1, 1000, 0, 1};
    const WorkloadType cpu_only{1000, 0, 0, 0, 1};
    const WorkloadType two_whole{1000, 2, 1000, 0, 1};
    // fits; GPUs with less than 0.5 free: 300
    CHECK(type_fragment(8000, gpus, half) == 300);
    // fits on GPU 0; 300 + 600 unusable by a whole-GPU task
    CHECK(type_fragment(8000, gpus, whole) == 900);
    // a CPU-only task uses no GPU: all 1900 free milli-GPU are a fragment for it
    CHECK(type_fragment(8000, gpus, cpu_only) == 1900);
    // needs two whole free GPUs, only one: everything is a fragment
    CHECK(type_fragment(8000, gpus, two_whole) == 1900);
    // not enough CPU left: everything is a fragment
    CHECK(type_fragment(1000, gpus, half) == 1900);
}

TEST_CASE("a type limited to other GPU models sees the whole node as a fragment") {
    std::array<GpuSlot, 2> gpus{GpuSlot{0, 1000}, GpuSlot{1, 1000}};
    WorkloadType on_model1{1000, 1, 500, ModelMask{1} << 1U, 1};
    CHECK(type_fragment(8000, gpus, on_model1) == 1000); // model 0's GPU is unusable
    WorkloadType on_model2{1000, 1, 500, ModelMask{1} << 2U, 1};
    CHECK(type_fragment(8000, gpus, on_model2) == 2000);
}

TEST_CASE("node fragmentation is the expectation over the workload") {
    const Workload w = two_types();
    // free: 1000, 300, 600 -> half: 300; whole: 900; expectation (300 + 900) / 2 = 600 milli-GPU
    Worker n = worker(1, {1000, 300, 600});
    CHECK(weighted_fragmentation(n, w) == 1200);
    CHECK(fragmentation_milli(n, w) == Approx(600.0));
    // a full node has nothing free, so nothing fragmented
    CHECK(fragmentation_milli(worker(2, {0, 0}), w) == 0.0);
    // an empty GPU is usable by both types
    CHECK(fragmentation_milli(worker(3, {1000}), w) == 0.0);
    // 0.4 free: unusable by both -> 400
    CHECK(fragmentation_milli(worker(4, {400}), w) == Approx(400.0));
}

TEST_CASE("typical workload keeps the most frequent types up to the popularity threshold") {
    std::vector<JobRequest> jobs;
    for (int i = 0; i < 6; ++i) {
        jobs.push_back(share_job(i, 500, 2000));
    }
    for (int i = 0; i < 3; ++i) {
        jobs.push_back(whole_job(10 + i, 1, 4000));
    }
    jobs.push_back(cpu_job(20, 8000));
    // counts 6, 3, 1 of 10: 90% needs the first two types, 95% all three
    Workload w90 = typical_workload(jobs, 90);
    REQUIRE(w90.types.size() == 2);
    CHECK(w90.types[0].gpu_milli == 500);
    CHECK(w90.types[0].count == 6);
    CHECK(w90.total_count == 9);
    Workload w95 = typical_workload(jobs, 95);
    CHECK(w95.types.size() == 3);
    CHECK(w95.total_count == 10);
    CHECK(w95.types[2].gpus == 0);
}

TEST_CASE("incremental fragmentation equals recomputing the changed node") {
    Rng rng(11);
    Workload w = two_types();
    w.types.push_back(WorkloadType{500, 2, 1000, 0, 3});
    w.types.push_back(WorkloadType{3000, 0, 0, 0, 2});
    w.total_count = 7;
    for (int round = 0; round < 200; ++round) {
        std::array<GpuSlot, 8> gpus{};
        const auto n = 1 + static_cast<std::size_t>(rng.uniform(8));
        for (std::size_t i = 0; i < n; ++i) {
            gpus[i] = GpuSlot{0, static_cast<std::int64_t>(rng.uniform(1001))};
        }
        const auto cpu_free = static_cast<std::int64_t>(rng.uniform(8000));
        const std::span<const GpuSlot> slots(gpus.data(), n);
        const NodeFragmentation frag(cpu_free, slots, w);
        CHECK(frag.before() == weighted_fragmentation(cpu_free, slots, w));
        const auto i = static_cast<std::uint32_t>(rng.uniform(n));
        const auto milli = static_cast<std::int64_t>(rng.uniform(static_cast<std::uint64_t>(gpus[i].free) + 1));
        const auto cpu = static_cast<std::int64_t>(rng.uniform(static_cast<std::uint64_t>(cpu_free) + 1));
        std::array<GpuSlot, 8> changed = gpus;
        changed[i].free -= milli;
        const std::array<std::uint32_t, 1> one{i};
        CHECK(frag.after(cpu, one, milli) ==
              weighted_fragmentation(cpu_free - cpu, std::span<const GpuSlot>(changed.data(), n), w));
    }
}

} // namespace test_fragmentation
} // namespace

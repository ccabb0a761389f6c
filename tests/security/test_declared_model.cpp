// Security review 3, low: attempts are priced by the GPU model a worker declares. A declared model
// whose memory is clearly not its catalog model's is a mismatch the coordinator reports (registration
// warns, `admin workers` shows model_mismatch); docs/security.md says what stays trusted.
#include "core/credits/catalog.hpp"
#include "core/credits/rates.hpp"

#include <catch2/catch.hpp>

#include <utility>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_declared_model {

using namespace gpupool;
using namespace gpupool::credits;

TEST_CASE("credits: a GPU whose memory is clearly not its catalog model's is a mismatch", "[credits][inventory]") {
    const RateCatalog& cat = default_rate_catalog();
    // What the drivers report for the real GPUs is within the margin.
    for (auto [model, mib] : {std::pair{"NVIDIA L4", 23034}, std::pair{"NVIDIA H100 80GB HBM3", 81559},
                              std::pair{"NVIDIA A100-PCIE-40GB", 40536}, std::pair{"Tesla T4", 15360},
                              std::pair{"NVIDIA H200", 143771}, std::pair{"NVIDIA L40S", 46068}}) {
        INFO(model);
        CHECK(cat.memory_mismatch(model, mib) == nullptr);
    }
    const GpuRate* h100 = cat.memory_mismatch("H100-80GB", 24576); // an L4 calling itself an H100
    REQUIRE(h100 != nullptr);
    CHECK(h100->model == "H100-80GB");
    CHECK(cat.memory_mismatch("NVIDIA H100 NVL", 95830) != nullptr); // read as H100-80GB: not in the catalog
    CHECK(cat.memory_mismatch("Quantum GPU 9000", 1) == nullptr);    // unknown: the other warning
}

} // namespace test_declared_model
} // namespace

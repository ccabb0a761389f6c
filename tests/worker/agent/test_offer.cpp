// What a worker offers: the inventory it builds passes the coordinator's rules (api/inventory.hpp)
// whatever its machine has; GPUs past the cap, or after one its owner does not share, are left out
// and said so instead of failing the registration.
#include "core/api/inventory.hpp"
#include "tests/support.hpp"
#include "worker/agent/offer.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_offer {

using namespace gpupool;
using namespace gpupool::worker;

namespace {

std::vector<GpuInfo> machine(std::vector<int> indexes) {
    std::vector<GpuInfo> out;
    for (int i : indexes) {
        out.push_back({i, "GPU-" + std::to_string(i), "NVIDIA L4", "L4", 23034});
    }
    return out;
}

std::vector<std::int64_t> indexes_of(const api::Inventory& inv) {
    std::vector<std::int64_t> out;
    for (const auto& g : inv.gpus) {
        out.push_back(g.index);
    }
    return out;
}

api::Inventory offered(const std::vector<GpuInfo>& gpus) {
    OfferOptions opt;
    opt.cpu_milli = 8000;
    opt.memory_mib = 32768;
    return offer_inventory({gpus, MemoryEnforcement::watchdog, "podman", nullptr}, ShareSettings{}, opt);
}

} // namespace

TEST_CASE("offer: a machine with more GPUs than the cap offers the first k_max_gpus and says so",
          "[worker][inventory]") {
    std::vector<int> many;
    for (int i = 69; i >= 0; --i) {
        many.push_back(i); // the driver's order is not trusted either
    }
    const auto inv = offered(machine(many));
    REQUIRE(inv.gpus.size() == api::k_max_gpus);
    CHECK(inv.gpus.front().index == 0);
    CHECK(inv.gpus.back().index == static_cast<std::int64_t>(api::k_max_gpus) - 1);
    CHECK(api::inventory_from_json(api::to_json(inv))); // the coordinator takes it

    const auto why = gpus_left_out(machine(many));
    REQUIRE(why);
    CHECK(why->find("GPU(s) 64, 65, 66, 67, 68, 69 left out") != std::string::npos);
    CHECK(why->find("at most 64 GPUs") != std::string::npos);
    CHECK_FALSE(gpus_left_out(machine({1, 0})));
}

TEST_CASE("offer: GPUs after one the owner does not share are left out, so that indexes stay 0..n-1",
          "[worker][inventory]") {
    CHECK(indexes_of(offered(machine({0, 1, 3}))) == std::vector<std::int64_t>{0, 1});
    CHECK(offered(machine({1, 2})).gpus.empty()); // GPU 0 kept by its owner
    const auto why = gpus_left_out(machine({0, 1, 3}));
    REQUIRE(why);
    CHECK(why->find("GPU(s) 3 left out") != std::string::npos);
    CHECK(why->find("GPU 2 is not offered") != std::string::npos);
    for (const auto& gpus : {machine({0, 1, 3}), machine({1, 2}), machine({2, 0, 1})}) {
        CHECK(api::inventory_from_json(api::to_json(offered(gpus))));
    }
}

TEST_CASE("offer: heartbeats name only GPUs of the inventory", "[worker][inventory]") {
    const auto inv = offered(machine({0, 1}));
    CHECK(inventory_indexes({1, 5, 0, 70}, inv) == std::vector<std::int64_t>{1, 0});
    CHECK(inventory_indexes({}, inv).empty());
}

} // namespace test_offer
} // namespace

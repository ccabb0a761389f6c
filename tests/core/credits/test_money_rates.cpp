// Exact credit amounts, the rate rules and the catalogs.
#include "core/credits/catalog.hpp"
#include "core/credits/money.hpp"
#include "core/credits/rates.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <fstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_money_rates {

using namespace gpupool;
using namespace gpupool::credits;

TEST_CASE("credits: decimal amounts parse exactly into micro-credits", "[credits]") {
    CHECK(parse_credits("12.5").value() == 12'500'000);
    CHECK(parse_credits("0.000001").value() == 1);
    CHECK(parse_credits("3").value() == 3'000'000);
    CHECK(parse_credits("0.1").value() == 100'000); // not 99'999 as a double would give
    CHECK(parse_credits("1_000").value() == 1'000'000'000);
    CHECK(parse_credits("-2.25", true).value() == -2'250'000);
    CHECK_FALSE(parse_credits("-2.25"));
    CHECK_FALSE(parse_credits("0.0000001"));
    CHECK_FALSE(parse_credits("1.2.3"));
    CHECK_FALSE(parse_credits("abc"));
    CHECK_FALSE(parse_credits(""));
    CHECK_FALSE(parse_credits("."));
    CHECK_FALSE(parse_credits("99999999999999"));
}

TEST_CASE("credits: amounts print with six decimals, trimmed", "[credits]") {
    CHECK(format_credits(12'500'000) == "12.5");
    CHECK(format_credits(1) == "0.000001");
    CHECK(format_credits(0) == "0");
    CHECK(format_credits(-1'250'000) == "-1.25");
    CHECK(format_credits(7'000'000) == "7");
    for (Micro v : {Micro{0}, Micro{1}, Micro{999'999}, Micro{123'456'789}, Micro{-42}}) {
        CHECK(parse_credits(format_credits(v), true).value() == v);
    }
}

TEST_CASE("credits: an attempt pays rate x the larger of its GPU and memory shares x time", "[credits]") {
    // half a GPU by milli, but 16 of 24 GiB of memory: billed 667 milli
    CHECK(billed_share_milli(500, 16384, 24576) == 667);
    CHECK(billed_share_milli(500, 0, 24576) == 500);
    CHECK(billed_share_milli(0, 24576, 24576) == 1000);
    // 4 credits/GPU-hour x 0.5 GPU = 2 credits/hour; 90 minutes -> 3 credits
    const Micro price = gpu_price_per_hour(4 * k_micro_per_credit, 500);
    CHECK(price == 2 * k_micro_per_credit);
    CHECK(cost_of(price, 90 * 60 * 1000) == 3 * k_micro_per_credit);
    CHECK(cost_of(price, 0) == 0);
    CHECK(cost_of(price, -5) == 0);
    CHECK(cost_of(price, 1) == 0); // rounds down: 0.00055 micro
    // CPU-only: 0.02/core-hour x 4 cores x 1 hour = 0.08
    CHECK(cost_of(cpu_price_per_hour(20'000, 4000), 3'600'000) == 80'000);
}

TEST_CASE("credits: the embedded GPU catalog is valid and matches driver names", "[credits]") {
    const RateCatalog& cat = default_rate_catalog();
    REQUIRE(cat.gpus.size() >= 8);
    REQUIRE(cat.find("NVIDIA H100 80GB HBM3") != nullptr);
    CHECK(cat.find("NVIDIA H100 80GB HBM3")->model == "H100-80GB");
    CHECK(cat.find("l4")->model == "L4");
    CHECK(cat.find("NVIDIA A100-SXM4-80GB")->model == "A100-80GB");
    CHECK(cat.find("NVIDIA GeForce RTX 4090")->model == "RTX-4090");
    CHECK(cat.find("Quantum GPU 9000") == nullptr);
    CHECK(cat.gpu_rate("Quantum GPU 9000") == cat.default_micro_per_gpu_hour);
    CHECK(cat.gpu_rate("L4") == k_micro_per_credit);
}

TEST_CASE("credits: the embedded price catalog is dated, sourced and names catalog GPUs", "[credits]") {
    const PriceCatalog& prices = default_price_catalog();
    CHECK_FALSE(prices.as_of.empty());
    REQUIRE(prices.prices.size() >= 8);
    for (const auto& p : prices.prices) {
        INFO(p.provider << " " << p.offering);
        CHECK(p.source.starts_with("https://"));
        CHECK_FALSE(p.date.empty());
        CHECK(p.micro_usd_per_gpu_hour > 0);
        CHECK(default_rate_catalog().find(p.gpu) != nullptr);
    }
}

TEST_CASE("credits: a bad catalog is refused naming file, line and field", "[credits]") {
    auto bad_rate =
        parse_rate_catalog("[[gpu]]\nmodel = \"X\"\nmemory = \"16GiB\"\ncredits_per_hour = \"1.2.3\"\n", "my.toml");
    REQUIRE_FALSE(bad_rate);
    CHECK(bad_rate.error().field == "gpu[0].credits_per_hour");
    REQUIRE(bad_rate.error().where);
    CHECK(bad_rate.error().where->file == "my.toml");
    CHECK(bad_rate.error().where->line == 4);

    auto missing_mem = parse_rate_catalog("[[gpu]]\nmodel = \"X\"\ncredits_per_hour = 1\n", "my.toml");
    REQUIRE_FALSE(missing_mem);
    CHECK(missing_mem.error().field == "gpu[0].memory");

    auto syntax = parse_rate_catalog("[[gpu]\n", "my.toml");
    REQUIRE_FALSE(syntax);
    CHECK(syntax.error().where->line == 1);

    auto no_source =
        parse_price_catalog("as_of = \"2024\"\n[[price]]\nprovider = \"A\"\noffering = \"o\"\ngpu = \"L4\"\n"
                            "usd_per_gpu_hour = \"1\"\ndate = \"2024\"\nsource = \"somewhere\"\n",
                            "p.toml");
    REQUIRE_FALSE(no_source);
    CHECK(no_source.error().field == "price[0].source");
    CHECK(no_source.error().where->line == 8);
}

} // namespace test_money_rates
} // namespace

#include "core/resources/quantity.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_quantity {

using namespace gpupool::resources;

TEST_CASE("milli-units parse exactly from decimal text") {
    CHECK(parse_milli("0.57").value() == 570); // not 569, as a truncated double would give
    CHECK(parse_milli("0.25").value() == 250);
    CHECK(parse_milli("1").value() == 1000);
    CHECK(parse_milli("0.001").value() == 1);
    CHECK(parse_milli("0.2500").value() == 250);
    CHECK(parse_milli("25%").value() == 250);
    CHECK(parse_milli("12.5%").value() == 125);
    CHECK_FALSE(parse_milli("0.0005"));
    CHECK_FALSE(parse_milli("-0.5"));
    CHECK_FALSE(parse_milli("half"));
    CHECK_FALSE(parse_milli("0.5 GPU"));
    CHECK_FALSE(parse_milli("."));
}

TEST_CASE("milli-units from doubles round to the nearest milli") {
    CHECK(milli_from_double(0.57).value() == 570);
    CHECK(milli_from_double(0.1).value() == 100);
    CHECK(milli_from_double(0.3).value() == 300);
    CHECK(milli_from_double(1.0).value() == 1000);
    CHECK(milli_from_double(0.333).value() == 333);
    CHECK_FALSE(milli_from_double(0.3333));
    CHECK_FALSE(milli_from_double(-1.0));
}

TEST_CASE("extreme numbers are refused, never overflowed") {
    // Found by the recipe fuzzer: 18 digits times 1000 overflowed 64 bits, and so did 10^frac
    // for a number with many leading fractional zeros.
    CHECK(parse_milli("1000000000000").value() == 1'000'000'000'000'000);
    CHECK_FALSE(parse_milli("1000000000001"));
    CHECK_FALSE(parse_milli("100000000000000000"));
    CHECK_FALSE(parse_milli("999999999999999999%"));
    CHECK(parse_milli("0.250000000000000000").value() == 250); // 18 decimals: still fine
    CHECK_FALSE(parse_milli("0.0000000000000000001"));         // 19 decimals
    CHECK_FALSE(parse_milli("0.00000000000000000000000000000000001"));
    CHECK_FALSE(parse_memory_mib("0.00000000000000000000000000001GiB"));
    CHECK(parse_memory_mib("0.000000000000000001GiB").value() == 1); // rounds up to 1 MiB
    CHECK_FALSE(parse_memory_mib("999999999999999999TiB"));
    CHECK_FALSE(parse_duration_s("0.00000000000000000000000001s"));
    CHECK_FALSE(parse_duration_s("999999999999999999d"));
    CHECK_FALSE(parse_duration_s("999999999999999999d999999999999999999d999999999999999999d"));
    CHECK_FALSE(milli_from_double(1e13));
}

TEST_CASE("memory sizes parse to MiB, rounding up") {
    CHECK(parse_memory_mib("16GiB").value() == 16384);
    CHECK(parse_memory_mib("512MiB").value() == 512);
    CHECK(parse_memory_mib("1.5GiB").value() == 1536);
    CHECK(parse_memory_mib("16G").value() == 16384);
    CHECK(parse_memory_mib("16Gi").value() == 16384);
    CHECK(parse_memory_mib("1TiB").value() == 1048576);
    CHECK(parse_memory_mib("16GB").value() == 15259); // 16e9 bytes = 15258.79 MiB, rounded up
    CHECK(parse_memory_mib("1B").value() == 1);
    CHECK(parse_memory_mib("16 gib").value() == 16384);
    CHECK_FALSE(parse_memory_mib("16"));
    CHECK_FALSE(parse_memory_mib("16XB"));
    CHECK_FALSE(parse_memory_mib("-1GiB"));
    CHECK_FALSE(parse_memory_mib("9999999TiB"));
}

TEST_CASE("durations parse to seconds") {
    CHECK(parse_duration_s("90m").value() == 5400);
    CHECK(parse_duration_s("1h30m").value() == 5400);
    CHECK(parse_duration_s("1.5h").value() == 5400);
    CHECK(parse_duration_s("45s").value() == 45);
    CHECK(parse_duration_s("2d").value() == 172800);
    CHECK_FALSE(parse_duration_s("90"));
    CHECK_FALSE(parse_duration_s("1h30"));
    CHECK_FALSE(parse_duration_s("5w"));
    CHECK_FALSE(parse_duration_s("0s"));
    CHECK_FALSE(parse_duration_s("31d"));
    CHECK_FALSE(parse_duration_s(""));
}

TEST_CASE("quantities print in their shortest exact form") {
    CHECK(format_milli(250) == "0.25");
    CHECK(format_milli(1000) == "1");
    CHECK(format_milli(1005) == "1.005");
    CHECK(format_memory_mib(16384) == "16GiB");
    CHECK(format_memory_mib(1536) == "1.5GiB");
    CHECK(format_memory_mib(64) == "64MiB");
    CHECK(format_memory_mib(1000) == "1000MiB");
    CHECK(format_duration_s(5400) == "1h30m");
    CHECK(format_duration_s(45) == "45s");
    CHECK(format_duration_s(0) == "0s");
}

TEST_CASE("gpu_milli_for_memory: a memory request as a share of one GPU, rounded up", "[quantity]") {
    using gpupool::resources::gpu_milli_for_memory;
    CHECK(gpu_milli_for_memory(12288, 24576) == 500);  // exactly half an L4
    CHECK(gpu_milli_for_memory(8192, 24576) == 334);   // 333.3...: never less than asked
    CHECK(gpu_milli_for_memory(1, 81920) == 1);        // the smallest request still takes a share
    CHECK(gpu_milli_for_memory(24576, 24576) == 1000); // the whole GPU
    CHECK(gpu_milli_for_memory(24577, 24576) == 1001); // more than it has: the caller refuses it
}

} // namespace test_quantity
} // namespace

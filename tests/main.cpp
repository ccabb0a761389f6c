// Catch2 runner: quiet logs unless GPUPOOL_LOG_LEVEL asks for more.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <spdlog/spdlog.h>

#include <cstdlib>

int main(int argc, char* argv[]) {
    const char* level = std::getenv("GPUPOOL_LOG_LEVEL"); // NOLINT(concurrency-mt-unsafe): before any thread
    spdlog::set_level(level != nullptr ? spdlog::level::from_str(level) : spdlog::level::warn);
    return Catch::Session().run(argc, argv);
}

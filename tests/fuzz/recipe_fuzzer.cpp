// libFuzzer entry point: any bytes through the recipe parser and the sweep expansion.
// Properties checked beyond "no crash, no sanitizer report": a failure always carries a position
// in the input, and a success expands to no more jobs than the cap.
#include "core/recipe/parser.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    gpupool::recipe::ParseOptions options;
    options.allow_file_access = false;
    options.max_sweep_jobs = 64;
    auto recipe = gpupool::recipe::parse_recipe_text(text, "fuzz.toml", options);
    if (!recipe) {
        if (!recipe.error().where || recipe.error().message.empty()) {
            std::abort();
        }
        return 0;
    }
    auto jobs = gpupool::recipe::expand(*recipe, options);
    if (jobs && jobs->size() > options.max_sweep_jobs) {
        std::abort();
    }
    return 0;
}

#include "cmd/model_memory.hpp"

#include "cmd/cli_app.hpp"
#include "core/resources/model_memory.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace gpupool::cmd {

namespace {

namespace fs = std::filesystem;

// An Error about the config file: where it is, and the field when there is one.
Error about_file(Error e, const fs::path& file) {
    e.where = SourcePos{file.string(), 0, 0};
    return e;
}

Result<std::string> read_config(const fs::path& path, fs::path& file) {
    std::error_code ec;
    const bool folder = fs::is_directory(path, ec);
    file = folder ? path / "config.json" : path;
    if (!fs::is_regular_file(file, ec)) {
        return make_error(ErrorCode::not_found,
                          folder ? path.string() + ": no config.json in this folder (a model's snapshot holds one)"
                                 : file.string() + ": no such file (give a model's config.json or its folder)");
    }
    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in && !in.eof()) {
        return make_error(ErrorCode::io, file.string() + ": cannot be read");
    }
    return text.str();
}

} // namespace

int run_model_memory(const ModelMemoryOptions& options) {
    fs::path file;
    auto text = read_config(options.path, file);
    if (!text) {
        report_error(options.global, text.error());
        return k_exit_failed;
    }
    auto shape = resources::model_shape_from_config(*text);
    if (!shape) {
        report_error(options.global, about_file(shape.error(), file));
        return k_exit_failed;
    }
    auto memory = resources::model_memory(*shape, {options.dtype, options.max_tokens, options.batch});
    if (!memory) {
        Error e = memory.error(); // `dtype`, `max_tokens` or `batch`: said as the option
        if (!e.field.empty()) {
            std::replace(e.field.begin(), e.field.end(), '_', '-');
            e.field = "--" + e.field;
        }
        report_error(options.global, e);
        return k_exit_usage;
    }
    // What the recipe asks for: the estimate in MiB, rounded up.
    const std::int64_t mib = (memory->total_bytes() + (std::int64_t{1} << 20) - 1) >> 20;
    if (options.global.json) {
        std::cout << nlohmann::ordered_json{{"config", file.string()},
                                            {"model_type", shape->model_type},
                                            {"parameters", memory->parameters},
                                            {"dtype", memory->dtype},
                                            {"max_tokens", options.max_tokens},
                                            {"batch", options.batch},
                                            {"weight_bytes", memory->weight_bytes},
                                            {"kv_cache_bytes", memory->kv_cache_bytes},
                                            {"overhead_bytes", memory->overhead_bytes},
                                            {"total_bytes", memory->total_bytes()},
                                            {"gpu_memory_mib", mib},
                                            {"basis", memory->basis}}
                         .dump()
                  << '\n';
        return k_exit_ok;
    }
    std::cout << file.string() << " (" << shape->model_type << ")\n"
              << memory->basis << "\n"
              << "in the recipe: [resources] gpu_memory = \"" << mib << "MiB\"\n";
    return k_exit_ok;
}

void register_model_memory(Cli& cli) {
    auto o = std::make_shared<ModelMemoryOptions>();
    CLI::App* sub = add_command(cli, "model-memory",
                                "How much GPU memory a model needs, from its config.json (nothing is downloaded)");
    sub->add_option("path", o->path, "The model's config.json, or the folder holding it (a snapshot)")->required();
    sub->add_option("--dtype", o->dtype,
                    "float32, float16, bfloat16, int8 or int4 (default: the config's torch_dtype, else bfloat16)");
    sub->add_option("--max-tokens", o->max_tokens, "Tokens per sequence, prompt and output, for the KV cache")
        ->capture_default_str();
    sub->add_option("--batch", o->batch, "Sequences at once, for the KV cache")->capture_default_str();
    add_help_footer(sub,
                    "gpupool model-memory ~/.cache/huggingface/hub/models--gpt2/snapshots/REV\n"
                    "gpupool model-memory config.json --dtype float16 --max-tokens 4096 --batch 8",
                    "docs/evidence.md", Reach::local);
    sub->callback([&cli, o] {
        o->global = cli.global;
        cli.exit_code = run_model_memory(*o);
    });
}

} // namespace gpupool::cmd

#include "core/catalog/starters.hpp"

#include "core/recipe/field_rules.hpp"
#include "core/util/strings.hpp"

#include <fstream>
#include <system_error>

namespace gpupool::catalog {

namespace fs = std::filesystem;

namespace {

// @NAME@ is the recipe's name; @IDENT@ the same as a Python identifier.
struct Starter {
    const char* name;
    std::vector<StarterFile> files;
};

const char* const k_readme = R"(# @NAME@

@DESCRIPTION@

Made with `gpupool recipe new --template @TEMPLATE@ @NAME@`. Check it with
`gpupool recipe validate recipe.toml`, see what it costs with `gpupool price recipe.toml`, try it
here with `gpupool run recipe.toml`@RUNTIME@, and send it to the pool with
`gpupool submit recipe.toml`. Outputs come back with `gpupool fetch`.
)";

const char* const k_python_main = R"("""@NAME@: a small, seeded computation that writes one JSON result (edit it)."""
import argparse
import json
import os
import random

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

rng = random.Random(args.seed)
n = 200_000
inside = sum(1 for _ in range(n) if rng.random() ** 2 + rng.random() ** 2 <= 1.0)
result = {"seed": args.seed, "samples": n, "pi_estimate": 4.0 * inside / n}

out = os.environ.get("GPUPOOL_OUTPUT_DIR", ".")
with open(os.path.join(out, "result.json"), "w") as f:
    json.dump(result, f, indent=2)
print(json.dumps(result))
)";

const char* const k_torch_main =
    R"("""@NAME@: fit a tiny MLP on synthetic data with PyTorch on the CPU, write its metrics (edit it)."""
import argparse
import json
import os

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()
torch.manual_seed(args.seed)

x = torch.randn(512, 8)
y = (x[:, :4].sum(dim=1) > 0).long()
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(200):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
accuracy = (model(x).argmax(dim=1) == y).float().mean().item()
result = {"seed": args.seed, "loss": loss.item(), "accuracy": accuracy, "torch": torch.__version__}

out = os.environ.get("GPUPOOL_OUTPUT_DIR", ".")
with open(os.path.join(out, "metrics.json"), "w") as f:
    json.dump(result, f, indent=2)
print(json.dumps(result))
)";

const char* const k_inspect_task =
    R"("""@NAME@: an Inspect task over dataset.jsonl, scored by exact match (edit the data and the solver)."""
from inspect_ai import Task, task
from inspect_ai.dataset import json_dataset
from inspect_ai.scorer import match
from inspect_ai.solver import generate


@task
def @IDENT@():
    return Task(dataset=json_dataset("dataset.jsonl"), solver=generate(), scorer=match())
)";

const char* const k_inspect_data = R"({"input": "What is 2 + 2? Answer with the number only.", "target": "4"}
{"input": "What is the capital of France? Answer with one word.", "target": "Paris"}
{"input": "How many legs has a spider? Answer with the number only.", "target": "8"}
)";

const char* const k_tlens_analysis =
    R"("""@NAME@: residual-stream norms per layer of GPT-2 small with TransformerLens (edit the prompt and the analysis)."""
import json
import os

import torch
from transformer_lens import HookedTransformer

device = "cuda" if torch.cuda.is_available() else "cpu"
model = HookedTransformer.from_pretrained("gpt2-small", device=device)
prompt = "When Mary and John went to the store, John gave a drink to"
_, cache = model.run_with_cache(prompt)
norms = [cache["resid_post", layer][0].norm(dim=-1).tolist() for layer in range(model.cfg.n_layers)]

out = os.environ.get("GPUPOOL_OUTPUT_DIR", ".")
with open(os.path.join(out, "resid_norms.json"), "w") as f:
    json.dump({"prompt": prompt, "tokens": model.to_str_tokens(prompt), "norms": norms}, f)
print("layers:", len(norms))
)";

std::string recipe_toml(const char* base, const char* script, const char* extra) {
    return std::string("# @NAME@, from `gpupool recipe new`: see README.md. Format: docs/recipes.md.\nformat = 1\n") +
           "extends = \"" + base + "\"\nname = \"@NAME@-{seed}\"\ntags = [\"starter\", \"" + base + "\"]\n" +
           "command = \"cd \\\"$GPUPOOL_WORK_DIR\\\" && python3 " + script + " --seed {seed}\"\n\n" + extra +
           "[inputs]\npaths = [\"" + script + "\"]\n\n[sweep]\nseed = [1, 2]\n";
}

std::vector<Starter> starters() {
    return {
        {"python",
         {{"recipe.toml", recipe_toml("python", "main.py", "[outputs]\npaths = [\"result.json\"]\n\n")},
          {"main.py", k_python_main}}},
        {"torch-cpu",
         {{"recipe.toml", recipe_toml("torch-cpu", "main.py", "[outputs]\npaths = [\"metrics.json\"]\n\n")},
          {"main.py", k_torch_main}}},
        {"inspect",
         {{"recipe.toml",
           "# @NAME@, from `gpupool recipe new`: see README.md. Format: docs/recipes.md.\nformat = 1\n"
           "extends = \"inspect\"\nname = \"@NAME@-{model}\"\ntags = [\"starter\", \"inspect\", \"eval\"]\n"
           "command = [\"inspect\", \"eval\", \"task.py\", \"--model\", \"hf/{model}\", \"--log-dir\", "
           "\"/outputs/logs\"]\n\n[resources]\ngpu_memory = \"8GiB\"\nmax_runtime = \"30m\"\n\n"
           "[inputs]\npaths = [\"task.py\", \"dataset.jsonl\"]\n\n[cache]\nmodels = "
           "[\"Qwen/Qwen2.5-0.5B-Instruct\"]\n\n"
           "[sweep]\nmodel = [\"Qwen/Qwen2.5-0.5B-Instruct\"]\n"},
          {"task.py", k_inspect_task},
          {"dataset.jsonl", k_inspect_data}}},
        {"transformerlens",
         {{"recipe.toml",
           "# @NAME@, from `gpupool recipe new`: see README.md. Format: docs/recipes.md.\nformat = 1\n"
           "extends = \"transformerlens\"\nname = \"@NAME@\"\ntags = [\"starter\", \"interpretability\"]\n"
           "command = [\"python3\", \"/work/analysis.py\"]\n\n[resources]\ngpu_memory = \"8GiB\"\n"
           "max_runtime = \"30m\"\n\n[inputs]\npaths = [\"analysis.py\"]\n\n"
           "[cache]\nmodels = [\"openai-community/gpt2\"]\n"},
          {"analysis.py", k_tlens_analysis}}},
    };
}

const char* description_of(std::string_view name) {
    if (name == "python") {
        return "A CPU-only Python job swept over two seeds; each writes `result.json`.";
    }
    if (name == "torch-cpu") {
        return "A PyTorch job on the CPU, on the `torch-cpu` image (templates/torch-cpu, built from Debian "
               "packages), swept over two seeds; each writes `metrics.json`.";
    }
    if (name == "inspect") {
        return "An Inspect evaluation of a small model on `dataset.jsonl`, on a GPU share; the eval logs land in "
               "`logs/`. Needs the `inspect` image (templates/inspect).";
    }
    return "A TransformerLens analysis of GPT-2 small on a GPU share, writing `resid_norms.json`. Needs the "
           "`transformerlens` image (templates/transformerlens).";
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
    for (auto pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size())) {
        text.replace(pos, from.size(), to);
    }
}

} // namespace

std::vector<std::string> starter_names() {
    std::vector<std::string> out;
    for (const auto& s : starters()) {
        out.emplace_back(s.name);
    }
    return out;
}

Result<std::vector<StarterFile>> starter_files(std::string_view name, std::string_view recipe_name) {
    if (auto st = recipe::check_recipe_name(recipe_name); !st) {
        return make_error(ErrorCode::invalid_input, st.error().message, "NAME");
    }
    for (auto& s : starters()) {
        if (s.name != name) {
            continue;
        }
        std::string ident(recipe_name);
        for (char& c : ident) {
            c = (c == '-' || c == '.') ? '_' : c;
        }
        if (ident.front() >= '0' && ident.front() <= '9') {
            ident = "task_" + ident;
        }
        const bool cpu = name == "python" || name == "torch-cpu";
        std::vector<StarterFile> files = std::move(s.files);
        files.push_back({"README.md", k_readme});
        for (auto& f : files) {
            replace_all(f.text, "@DESCRIPTION@", description_of(name));
            replace_all(f.text, "@TEMPLATE@", name);
            replace_all(f.text, "@RUNTIME@",
                        cpu ? (name == "python" ? " (add `--runtime process` to skip the container)"
                                                : " (add `--runtime podman`)")
                            : " on a machine with a GPU");
            replace_all(f.text, "@NAME@", recipe_name);
            replace_all(f.text, "@IDENT@", ident);
        }
        return files;
    }
    std::string msg = "no starter template `" + std::string(name) + "`; there are " + util::join(starter_names(), ", ");
    return make_error(ErrorCode::invalid_input, std::move(msg), "--template");
}

Status write_starter(std::string_view name, std::string_view recipe_name, const fs::path& dest) {
    auto files = starter_files(name, recipe_name);
    if (!files) {
        return files.error();
    }
    std::error_code ec;
    if (fs::exists(fs::symlink_status(dest, ec))) {
        return make_error(ErrorCode::conflict, "`" + dest.string() + "` already exists; name another folder");
    }
    fs::create_directories(dest, ec);
    if (ec) {
        return make_error(ErrorCode::io, "cannot create `" + dest.string() + "`: " + ec.message());
    }
    for (const auto& f : *files) {
        std::ofstream out(dest / f.path, std::ios::binary);
        out << f.text;
        out.close();
        if (!out) {
            return make_error(ErrorCode::io, "cannot write `" + (dest / f.path).string() + "`");
        }
    }
    return {};
}

} // namespace gpupool::catalog

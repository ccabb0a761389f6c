// Every invalid recipe is rejected with the line of the offending key or value and a message
// that says what was expected. Table-driven: one row per mistake a user can make.
#include "core/recipe/parser.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <string>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_recipe_invalid {

using namespace gpupool;
using namespace gpupool::recipe;

namespace {

struct Case {
    const char* title;
    const char* text;
    std::uint32_t line;
    const char* fragment;
    const char* field = nullptr;
};

// Line 1 and 2 are always image and command, so the line numbers below read naturally.
#define HEAD "image = \"busybox\"\ncommand = [\"true\"]\n"

const Case k_cases[] = {
    {"TOML syntax error", HEAD "name = \n", 3, "TOML syntax error"},
    {"unterminated string", HEAD "name = \"abc\n", 3, "TOML syntax error"},
    {"duplicate key", HEAD "name = \"a\"\nname = \"b\"\n", 4, "TOML syntax error"},
    {"unknown top-level key", HEAD "imag = \"x\"\n", 3, "did you mean `image`?", "imag"},
    {"unknown top-level table", HEAD "[resource]\ngpu = 0.5\n", 3, "did you mean `resources`?", "resource"},
    {"unknown resources key with suggestion", HEAD "[resources]\ngpu_mem = \"16GiB\"\n", 4,
     "unknown key `gpu_mem` in [resources]; did you mean `gpu_memory`?", "resources.gpu_mem"},
    {"unknown key far from anything", HEAD "[resources]\nzzzzzz = 1\n", 4, "valid keys are"},
    {"missing image", "command = [\"true\"]\n", 0, "missing required key `image`", "image"},
    {"missing command", "image = \"busybox\"\n", 0, "missing required key `command`", "command"},
    {"image wrong type", "image = 3\ncommand = [\"true\"]\n", 1, "expected a string, got an integer", "image"},
    {"image empty", "image = \"\"\ncommand = [\"true\"]\n", 1, "must not be empty", "image"},
    {"image with spaces", "image = \"bad image\"\ncommand = [\"true\"]\n", 1, "has no spaces", "image"},
    {"command empty array", "image = \"busybox\"\ncommand = []\n", 2, "must name a program", "command"},
    {"command element not a string", "image = \"busybox\"\ncommand = [\"echo\", 5]\n", 2,
     "expected a string, got an integer", "command[1]"},
    {"command wrong type", "image = \"busybox\"\ncommand = 5\n", 2, "expected an array of arguments or a shell command",
     "command"},
    {"command blank string", "image = \"busybox\"\ncommand = \"   \"\n", 2, "must not be empty", "command"},
    {"format version", HEAD "format = 2\n", 3, "recipe format 1", "format"},
    {"name wrong type", HEAD "name = [\"a\"]\n", 3, "expected a string, got an array", "name"},
    {"priority unknown", HEAD "priority = \"urgent\"\n", 3, "expected \"low\", \"normal\" or \"high\"", "priority"},
    {"priority typo", HEAD "priority = \"hihg\"\n", 3, "did you mean \"high\"?", "priority"},
    {"gpu and gpus both", HEAD "[resources]\ngpu = 0.5\ngpus = 1\n", 5, "`gpu` and `gpus` are both set",
     "resources.gpus"},
    {"gpu and gpu_memory both", HEAD "[resources]\ngpu = 0.5\ngpu_memory = \"8GiB\"\n", 5,
     "`gpu` and `gpu_memory` are both set", "resources.gpu_memory"},
    {"gpu above one", HEAD "[resources]\ngpu = 1.5\n", 4, "must be at most 1", "resources.gpu"},
    {"gpu zero", HEAD "[resources]\ngpu = 0\n", 4, "write `gpus = 0`", "resources.gpu"},
    {"gpu negative", HEAD "[resources]\ngpu = -0.5\n", 4, "non-negative", "resources.gpu"},
    {"gpu too fine", HEAD "[resources]\ngpu = 0.0005\n", 4, "finer than the resolution", "resources.gpu"},
    {"gpu bad string", HEAD "[resources]\ngpu = \"half\"\n", 4, "expected a number", "resources.gpu"},
    // Found by the fuzzer (tests/fuzz/regressions/): both overflowed 64 bits before being refused.
    {"cpus far too large", HEAD "[resources]\ncpus = \"100000000000000000\"\n", 4, "is too large", "resources.cpus"},
    {"cpus with too many decimal places", HEAD "[resources]\ncpus = \"0.00000000000000000000000001\"\n", 4,
     "too many decimal places", "resources.cpus"},
    {"gpu wrong type", HEAD "[resources]\ngpu = true\n", 4, "expected a number like 0.25, got a boolean",
     "resources.gpu"},
    {"gpus two", HEAD "[resources]\ngpus = 2\n", 4, "`gpus` must be 0 or 1", "resources.gpus"},
    {"gpus negative", HEAD "[resources]\ngpus = -1\n", 4, "expected an integer from 0 to 1", "resources.gpus"},
    {"gpus float", HEAD "[resources]\ngpus = 1.0\n", 4, "expected an integer, got a float", "resources.gpus"},
    {"gpu_memory without unit", HEAD "[resources]\ngpu_memory = 16\n", 4, "needs a unit", "resources.gpu_memory"},
    {"gpu_memory bad unit", HEAD "[resources]\ngpu_memory = \"16XB\"\n", 4, "unknown size unit `XB`",
     "resources.gpu_memory"},
    {"gpu_memory zero", HEAD "[resources]\ngpu_memory = \"0GiB\"\n", 4, "larger than zero", "resources.gpu_memory"},
    {"gpu_memory with gpus 0", HEAD "[resources]\ngpus = 0\ngpu_memory = \"8GiB\"\n", 5, "`gpus = 0` asks for no GPU",
     "resources.gpu_memory"},
    {"gpu_models on a CPU job", HEAD "[resources]\ngpus = 0\ngpu_models = [\"A100\"]\n", 5, "asks for no GPU",
     "resources.gpu_models"},
    {"gpu_models empty", HEAD "[resources]\ngpu = 0.5\ngpu_models = []\n", 5, "at least one GPU model",
     "resources.gpu_models"},
    {"gpu_models not strings", HEAD "[resources]\ngpu = 0.5\ngpu_models = [\"A100\", 3]\n", 5,
     "expected a string, got an integer", "resources.gpu_models[1]"},
    {"cpus zero", HEAD "[resources]\ncpus = 0\n", 4, "must be larger than 0", "resources.cpus"},
    {"cpus huge", HEAD "[resources]\ncpus = 5000\n", 4, "at most 1024", "resources.cpus"},
    {"memory without unit", HEAD "[resources]\nmemory = 4096\n", 4, "needs a unit", "resources.memory"},
    {"disk negative", HEAD "[resources]\ndisk = \"-1GiB\"\n", 4, "non-negative size", "resources.disk"},
    {"max_runtime integer", HEAD "[resources]\nmax_runtime = 90\n", 4, "a duration needs a unit",
     "resources.max_runtime"},
    {"idle_timeout bad unit", HEAD "[resources]\nidle_timeout = \"3w\"\n", 4, "unknown duration unit `w`",
     "resources.idle_timeout"},
    {"max_runtime bad unit", HEAD "[resources]\nmax_runtime = \"2w\"\n", 4, "unknown duration unit `w`",
     "resources.max_runtime"},
    {"max_runtime too long", HEAD "[resources]\nmax_runtime = \"40d\"\n", 4, "30-day maximum", "resources.max_runtime"},
    {"max_runtime unknown word", HEAD "[resources]\nmax_runtime = \"5 weeks\"\n", 4,
     "unknown duration unit `weeks` in `5 weeks`; use s, m, h or d (or sec, min, hour, day)", "resources.max_runtime"},
    {"max_runtime upper-case unit", HEAD "[resources]\nmax_runtime = \"5M\"\n", 4, "unknown duration unit `M`",
     "resources.max_runtime"},
    {"resources not a table", HEAD "resources = 3\n", 3, "expected a table, got an integer", "resources"},
    {"env bad name", HEAD "[env]\n\"1BAD\" = \"x\"\n", 4, "must not start with a digit", "env.1BAD"},
    {"env reserved prefix", HEAD "[env]\nGPUPOOL_JOB_ID = \"x\"\n", 4, "reserved", "env.GPUPOOL_JOB_ID"},
    {"env value table", HEAD "[env]\nA = { b = 1 }\n", 4, "expected a string, number or boolean, got a table", "env.A"},
    {"inputs missing file", HEAD "[inputs]\npaths = [\"definitely-not-here.bin\"]\n", 4, "does not exist",
     "inputs.paths[0]"},
    {"inputs max_size above cap", HEAD "[inputs]\nmax_size = \"5GiB\"\n", 4, "cap of 900MiB", "inputs.max_size"},
    {"inputs unknown key", HEAD "[inputs]\nfiles = [\"a\"]\n", 4, "unknown key `files` in [inputs]", "inputs.files"},
    {"outputs absolute path", HEAD "[outputs]\npaths = [\"/etc/passwd\"]\n", 4, "relative to the job's output",
     "outputs.paths[0]"},
    {"outputs parent escape", HEAD "[outputs]\npaths = [\"ok\", \"../x\"]\n", 4, "may not contain `..`",
     "outputs.paths[1]"},
    {"outputs max_size above cap", HEAD "[outputs]\nmax_size = \"2GiB\"\n", 4, "cap of 900MiB", "outputs.max_size"},
    {"logs max_size above any pool's", HEAD "[logs]\nmax_size = \"100TiB\"\n", 4, "larger than any pool allows",
     "logs.max_size"},
    {"logs max_size without a unit", HEAD "[logs]\nmax_size = 512\n", 4, "unit", "logs.max_size"},
    {"logs unknown key", HEAD "[logs]\nkeep = \"1GiB\"\n", 4, "unknown key `keep` in [logs]", "logs.keep"},
    {"outputs empty", HEAD "[outputs]\npaths = []\n", 4, "at least one path", "outputs.paths"},
    {"cache bad model id", HEAD "[cache]\nmodels = [\"not a model\"]\n", 4, "is not a model id", "cache.models[0]"},
    {"cache model revision with ..", HEAD "[cache]\nmodels = [\"org/m@a/../b\"]\n", 4, "the revision after",
     "cache.models[0]"},
    {"cache model revision empty", HEAD "[cache]\nmodels = [\"org/m@\"]\n", 4, "the revision after", "cache.models[0]"},
    {"cache model revision with a space", HEAD "[cache]\nmodels = [\"org/m@main branch\"]\n", 4, "the revision after",
     "cache.models[0]"},
    {"cache models wrong type", HEAD "[cache]\nmodels = \"gpt2\"\n", 4, "expected an array of strings, got a string",
     "cache.models"},
    {"cache dtype unknown", HEAD "[cache]\nmodels = [\"gpt2\"]\ndtype = \"float8\"\n", 5,
     "`float8` is not a dtype gpupool can size: one of float32, float16, bfloat16, int8, int4", "cache.dtype"},
    {"cache dtype not a string", HEAD "[cache]\ndtype = 16\n", 4, "expected a string", "cache.dtype"},
    {"cache max_tokens zero", HEAD "[cache]\nmodels = [\"gpt2\"]\nmax_tokens = 0\n", 5,
     "expected an integer from 1 to 16777216, got 0", "cache.max_tokens"},
    {"cache max_tokens a string", HEAD "[cache]\nmax_tokens = \"4k\"\n", 4, "expected an integer", "cache.max_tokens"},
    {"cache batch zero", HEAD "[cache]\nbatch = 0\n", 4, "expected an integer from 1 to 65536, got 0", "cache.batch"},
    {"cache unknown key", HEAD "[cache]\nmax_token = 4096\n", 4, "did you mean `max_tokens`?", "cache.max_token"},
    {"retry max_attempts zero", HEAD "[retry]\nmax_attempts = 0\n", 4, "expected an integer from 1 to 20",
     "retry.max_attempts"},
    {"retry exit code zero", HEAD "[retry]\non_exit_codes = [1, 0]\n", 4, "exit code 0 is success",
     "retry.on_exit_codes[1]"},
    {"retry exit code too big", HEAD "[retry]\non_exit_codes = [300]\n", 4, "from 1 to 255", "retry.on_exit_codes[0]"},
    {"retry unknown key", HEAD "[retry]\nattempts = 3\n", 4, "did you mean `max_attempts`?", "retry.attempts"},
    {"checkpoint without every", HEAD "[checkpoint]\ngrace = \"1m\"\n", 3, "missing: how often the job saves",
     "checkpoint.every"},
    {"checkpoint every without a unit", HEAD "[checkpoint]\nevery = 600\n", 4, "unit", "checkpoint.every"},
    {"checkpoint grace too long", HEAD "[checkpoint]\nevery = \"10m\"\ngrace = \"1h\"\n", 5, "at most 10 minutes",
     "checkpoint.grace"},
    {"checkpoint unknown key", HEAD "[checkpoint]\nevery = \"10m\"\ninterval = \"5m\"\n", 5,
     "unknown key `interval` in [checkpoint]", "checkpoint.interval"},
    {"checkpoint not a table", HEAD "checkpoint = \"10m\"\n", 3, "expected a table", "checkpoint"},
    {"verify unknown mode", HEAD "[verify]\ncompare = \"fuzzy\"\n", 4, "must be \"exact\", \"json\" or \"none\"",
     "verify.compare"},
    {"verify tolerance without json", HEAD "[verify]\ntolerance = 0.01\n", 4, "applies to compare = \"json\" only",
     "verify.tolerance"},
    {"verify tolerance out of range", HEAD "[verify]\ncompare = \"json\"\ntolerance = 2.0\n", 5, "from 0 to 1",
     "verify.tolerance"},
    {"verify tolerance a string", HEAD "[verify]\ncompare = \"json\"\ntolerance = \"1e-3\"\n", 5,
     "expected a number, got a string", "verify.tolerance"},
    {"verify files escape the outputs", HEAD "[verify]\nfiles = [\"ok.json\", \"../secret\"]\n", 4, "..",
     "verify.files[1]"},
    {"verify unknown key", HEAD "[verify]\ncompare = \"json\"\ntolerence = 0.1\n", 5, "did you mean `tolerance`?",
     "verify.tolerence"},
    {"sweep scalar instead of list", HEAD "[sweep]\nlr = 0.1\n", 4, "expected an array of values", "sweep.lr"},
    {"sweep empty list", HEAD "[sweep]\nlr = []\n", 4, "at least one value", "sweep.lr"},
    {"sweep duplicate value", HEAD "[sweep]\nseed = [1, 2, 1]\n", 4, "duplicate sweep value `1`", "sweep.seed[2]"},
    {"sweep nested table value", HEAD "[sweep]\nx = [{ a = 1 }]\n", 4, "strings, numbers or booleans", "sweep.x[0]"},
    {"sweep max_parallel zero", HEAD "[sweep]\nmax_parallel = 0\nx = [1]\n", 4, "from 1 to", "sweep.max_parallel"},
    {"sweep too many jobs",
     HEAD "[sweep]\na = [1,2,3,4,5,6,7,8,9,10]\nb = [1,2,3,4,5,6,7,8,9,10]\n"
          "c = [1,2,3,4,5,6,7,8,9,10]\nd = [1,2,3,4,5,6,7,8,9,10]\ne = [1,2]\n",
     3, "expands to 20000 jobs, more than the cap of 10000", "sweep"},
    {"placeholder without sweep", "image = \"busybox\"\ncommand = [\"echo\", \"{model}\"]\n", 2,
     "`{model}` names no sweep parameter (the recipe has no [sweep])", "command[1]"},
    {"placeholder typo", "image = \"busybox\"\ncommand = \"run {modle}\"\n[sweep]\nmodel = [\"a\"]\n", 2,
     "did you mean `{model}`?", "command"},
    {"placeholder in name", HEAD "name = \"job-{x}\"\n", 3, "`{x}` names no sweep parameter", "name"},
    {"placeholder in env", HEAD "[env]\nA = \"{nope}\"\n[sweep]\nyes = [1]\n", 4, "`{nope}` names no sweep parameter",
     "env.A"},
    {"extends unknown built-in", HEAD "extends = \"inspekt\"\n", 3, "did you mean `inspect`?", "extends"},
    {"extends wrong type", HEAD "extends = 1\n", 3, "expected a string, got an integer", "extends"},
    {"extends missing file", HEAD "extends = \"./nope/base.toml\"\n", 3, "does not exist", "extends"},
};

#undef HEAD

} // namespace

TEST_CASE("invalid recipes name the line, the field and what was expected") {
    REQUIRE(std::size(k_cases) >= 40);
    for (const Case& c : k_cases) {
        DYNAMIC_SECTION(c.title) {
            auto r = parse_recipe_text(c.text, "bad.toml");
            std::vector<std::string> jobs_error;
            if (r) {
                auto jobs = expand(*r);
                REQUIRE_FALSE(jobs); // if parsing passed, expansion must fail
                r = jobs.error();
            }
            REQUIRE_FALSE(r);
            const Error& e = r.error();
            INFO("got: " << e.describe());
            REQUIRE(e.code == ErrorCode::invalid_input);
            REQUIRE(e.where);
            CHECK(e.where->file == "bad.toml");
            CHECK(e.where->line == c.line);
            if (c.line > 0) {
                CHECK(e.where->column > 0);
            }
            CHECK_THAT(e.message, Catch::Contains(c.fragment));
            if (c.field != nullptr) {
                CHECK(e.field == c.field);
            }
            CHECK_THAT(e.describe(), Catch::StartsWith(c.line > 0 ? "bad.toml:" + std::to_string(c.line) + ":"
                                                                  : std::string("bad.toml: ")));
        }
    }
}

TEST_CASE("all problems in one recipe are reported, in file order") {
    const char* text = "image = \"busybox\"\n"
                       "command = []\n"
                       "priority = \"soon\"\n"
                       "[resources]\n"
                       "gpu = 2\n"
                       "memory = 12\n";
    auto r = parse_recipe_text(text, "many.toml");
    REQUIRE_FALSE(r);
    const Error& e = r.error();
    REQUIRE(e.more.size() == 3);
    CHECK(e.where->line == 2);
    CHECK(e.more[0].where->line == 3);
    CHECK(e.more[1].where->line == 5);
    CHECK(e.more[2].where->line == 6);
}

TEST_CASE("errors inside an extended file name that file") {
    gpupool::test::TempDir dir;
    dir.write("base.toml", "image = \"busybox\"\ncommand = [\"true\"]\n[resources]\ngpu_mem = \"1GiB\"\n");
    auto child = dir.write("child.toml", "extends = \"base.toml\"\nname = \"x\"\n");
    auto r = parse_recipe_file(child);
    REQUIRE_FALSE(r);
    CHECK(r.error().where->file == (dir.path() / "base.toml").string());
    CHECK(r.error().where->line == 4);
    CHECK_THAT(r.error().message, Catch::Contains("did you mean `gpu_memory`?"));
}

TEST_CASE("errors in a recipe that extends another name the recipe's own lines") {
    gpupool::test::TempDir dir;
    dir.write("base.toml", "image = \"busybox\"\ncommand = [\"true\"]\n[resources]\ngpu = 0.5\n");
    auto child = dir.write("child.toml", "extends = \"base.toml\"\nname = \"x\"\n[resources]\ncpus = 0\n");
    auto r = parse_recipe_file(child);
    REQUIRE_FALSE(r);
    CHECK(r.error().where->file == child.string());
    CHECK(r.error().where->line == 4);
    CHECK(r.error().field == "resources.cpus");
}

TEST_CASE("extends cycles are detected") {
    gpupool::test::TempDir dir;
    dir.write("a.toml", "extends = \"b.toml\"\nimage = \"x\"\ncommand = [\"true\"]\n");
    dir.write("b.toml", "extends = \"a.toml\"\n");
    auto r = parse_recipe_file(dir.path() / "a.toml");
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("cycle"));
}

TEST_CASE("inputs over their size cap are refused with the measured size") {
    gpupool::test::TempDir dir;
    dir.write("data/big.bin", std::string(2 * 1024 * 1024, 'x'));
    auto file = dir.write("r.toml", "image = \"b\"\ncommand = [\"true\"]\n[inputs]\npaths = [\"data\"]\nmax_size = \"1MiB\"\n");
    auto r = parse_recipe_file(file);
    REQUIRE_FALSE(r);
    CHECK(r.error().where->line == 4);
    CHECK_THAT(r.error().message, Catch::Contains("inputs add up to 2MiB, more than max_size 1MiB"));
}

TEST_CASE("overrides from --set are validated like the file") {
    ParseOptions options;
    options.overrides = {{"resources.gpus", "3"}};
    auto r = parse_recipe_text("image = \"b\"\ncommand = [\"true\"]\n", "o.toml", options);
    REQUIRE_FALSE(r);
    CHECK(r.error().field == "resources.gpus");
    CHECK(r.error().where->file == "--set resources.gpus");
    CHECK(r.error().where->line == 0); // the command line has no lines to point at
}

TEST_CASE("every --set problem names --set KEY as its source") {
    struct Row {
        const char* key;
        const char* value;
        const char* fragment;
        const char* field;
    };
    const Row rows[] = {
        // A value that is not TOML is taken as a string: the string's own error names --set too.
        {"resources.gpu_memory", "abc", "expected a size like \"16GiB\" or \"512MiB\", got `abc`",
         "resources.gpu_memory"},
        {"resources.max_runtime", "soon", "expected a duration like", "resources.max_runtime"},
        {"resources.gpu_mem", "16GiB", "unknown key `gpu_mem` in [resources]; did you mean `gpu_memory`?",
         "resources.gpu_mem"},
        // A table that the recipe does not have comes from --set as a whole.
        {"retyr.max_attempts", "3", "unknown key `retyr` at the top level; did you mean `retry`?", "retyr"},
        {"retry.max_attempts", "0", "expected an integer from 1 to 20", "retry.max_attempts"},
        {"command", "[1", "`[1` is not a TOML value", "command"},
        {"image.tag", "2", "`image` is a string in the recipe, not a table, so it has no `tag`", "image.tag"},
        {"a..b", "1", "`--set` needs a key path like resources.gpu=0.5", "a..b"},
        {"name", "\"x\"\nimage = \"other\"", "`--set` takes one value", "name"},
    };
    for (const Row& row : rows) {
        DYNAMIC_SECTION(row.key << "=" << row.value) {
            ParseOptions options;
            options.overrides = {{row.key, row.value}};
            auto r = parse_recipe_text("image = \"b\"\ncommand = [\"true\"]\n", "o.toml", options);
            REQUIRE_FALSE(r);
            const Error& e = r.error();
            INFO("got: " << e.describe());
            CHECK(e.more.empty());
            REQUIRE(e.where);
            CHECK(e.where->file == std::string("--set ") + row.key);
            CHECK(e.where->line == 0);
            CHECK(e.where->column == 0);
            CHECK(e.field == row.field);
            CHECK_THAT(e.message, Catch::Contains(row.fragment));
        }
    }
}

TEST_CASE("a misspelt [sweep] is the one error: the placeholders it defines are not blamed") {
    const char* text = "image = \"busybox\"\n"
                       "command = [\"echo\", \"{n}\", \"{lr}\"]\n"
                       "name = \"job-{n}\"\n"
                       "[sweeps]\n"
                       "n = [1, 2]\n"
                       "lr = [0.1]\n";
    auto r = parse_recipe_text(text, "s.toml");
    REQUIRE_FALSE(r);
    const Error& e = r.error();
    INFO("got: " << e.describe());
    CHECK(e.where->line == 4);
    CHECK(e.field == "sweeps");
    CHECK_THAT(e.message, Catch::Contains("did you mean `sweep`?"));
    CHECK(e.more.empty());
}

TEST_CASE("a placeholder that no table defines is still reported, after the root cause") {
    const char* text = "image = \"busybox\"\n"
                       "command = [\"echo\", \"{n}\", \"{m}\"]\n"
                       "[sweeps]\n"
                       "n = [1, 2]\n";
    auto r = parse_recipe_text(text, "s.toml");
    REQUIRE_FALSE(r);
    const Error& e = r.error();
    CHECK(e.where->line == 3);
    CHECK_THAT(e.message, Catch::Contains("did you mean `sweep`?"));
    REQUIRE(e.more.size() == 1);
    CHECK(e.more[0].where->line == 2);
    CHECK(e.more[0].field == "command[2]");
    CHECK_THAT(e.more[0].message, Catch::Contains("`{m}` names no sweep parameter"));
}

TEST_CASE("a sweep parameter with a bad value is blamed once, not again at its placeholder") {
    auto r = parse_recipe_text("image = \"busybox\"\ncommand = \"run {lr}\"\n[sweep]\nlr = 0.1\n", "s.toml");
    REQUIRE_FALSE(r);
    CHECK(r.error().field == "sweep.lr");
    CHECK(r.error().more.empty());
}

TEST_CASE("a misspelt required key is the one error: its absence is not reported again") {
    auto r = parse_recipe_text("imgae = \"busybox\"\ncommand = [\"true\"]\n", "i.toml");
    REQUIRE_FALSE(r);
    const Error& e = r.error();
    INFO("got: " << e.describe());
    CHECK(e.where->line == 1);
    CHECK(e.field == "imgae");
    CHECK_THAT(e.message, Catch::Contains("did you mean `image`?"));
    CHECK(e.more.empty());
}

TEST_CASE("errors that follow from others come after every root cause") {
    // A missing key and an undefined placeholder are listed after the bad values, whatever their line.
    const char* text = "command = [\"echo\", \"{x}\"]\n"
                       "[resources]\n"
                       "gpus = 0\n"
                       "gpu_models = [\"A100\"]\n"
                       "cpus = \"many\"\n";
    auto r = parse_recipe_text(text, "c.toml");
    REQUIRE_FALSE(r);
    const Error& e = r.error();
    INFO("got: " << e.describe());
    CHECK(e.field == "resources.cpus");
    REQUIRE(e.more.size() == 3);
    CHECK(e.more[0].field == "image"); // no line: it is missing
    CHECK(e.more[1].field == "command[1]");
    CHECK(e.more[2].field == "resources.gpu_models");
}

TEST_CASE("the sweep cap is configurable") {
    ParseOptions options;
    options.max_sweep_jobs = 3;
    auto r = parse_recipe_text("image = \"b\"\ncommand = [\"true\"]\n[sweep]\nx = [1, 2, 3, 4]\n", "cap.toml", options);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("expands to 4 jobs, more than the cap of 3"));
}

} // namespace test_recipe_invalid
} // namespace

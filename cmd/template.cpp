#include "cmd/template.hpp"

#include "cmd/cli_app.hpp"
#include "core/recipe/field_rules.hpp"
#include "core/recipe/image_ref.hpp"

#include <boost/process.hpp>

#include <fstream>
#include <iostream>
#include <memory>
#include <regex>

namespace gpupool::cmd {

namespace bp = boost::process;
namespace fs = std::filesystem;

namespace {

// Runs argv (argv[0] found on PATH) with the engine's output on ours; the exit code, or -1.
int run_child(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env = {}) {
    try {
        const auto exe =
            argv[0].find('/') == std::string::npos ? bp::search_path(argv[0]) : bp::filesystem::path(argv[0]);
        if (exe.empty()) {
            std::cerr << "error: `" << argv[0] << "` is not on PATH\n";
            return -1;
        }
        auto child_env = boost::this_process::environment();
        for (const auto& [k, v] : env) {
            child_env[k] = v;
        }
        const std::vector<std::string> args(argv.begin() + 1, argv.end());
        return bp::system(bp::exe = exe.string(), bp::args = args, bp::std_in < bp::null, child_env);
    } catch (const std::exception& e) {
        std::cerr << "error: cannot run " << argv[0] << ": " << e.what() << '\n';
        return -1;
    }
}

bool image_exists(const std::string& engine, const std::string& image) {
    try {
        return bp::system(bp::search_path(engine), "image", "inspect", image, bp::std_out > bp::null,
                          bp::std_err > bp::null, bp::std_in < bp::null) == 0;
    } catch (const std::exception&) {
        return false;
    }
}

// The base image a Dockerfile starts from, when it is ours (`FROM localhost/gpupool/base:TAG`).
std::string base_of(const fs::path& dockerfile) {
    std::ifstream in(dockerfile);
    std::string line;
    static const std::regex from(R"(^\s*FROM\s+(localhost/gpupool/base:[A-Za-z0-9_.-]+)\s*$)", std::regex::icase);
    while (std::getline(in, line)) {
        std::smatch m;
        if (std::regex_match(line, m, from)) {
            return m[1];
        }
    }
    return {};
}

int build_one(const TemplateOptions& o, const std::string& name, const std::string& tag) {
    const fs::path dir = fs::path(o.from) / name;
    std::error_code ec;
    if (fs::is_regular_file(dir / "build.sh", ec)) {
        std::cerr << "template: " << (dir / "build.sh").string() << " (ENGINE=" << o.runtime << ")\n";
        if (run_child({"bash", (dir / "build.sh").string()}, {{"ENGINE", o.runtime}}) != 0) {
            return k_exit_failed;
        }
        const std::string built = "localhost/gpupool/" + name + ":latest";
        if (tag != built && run_child({o.runtime, "tag", built, tag}) != 0) {
            return k_exit_failed;
        }
        return k_exit_ok;
    }
    if (!fs::is_regular_file(dir / "Dockerfile", ec)) {
        report_error(o.global, make_error(ErrorCode::not_found, "no template `" + name + "` in `" + o.from +
                                                                    "` (neither a Dockerfile nor a build.sh); run "
                                                                    "this from a gpupool checkout or pass --from"));
        return k_exit_failed;
    }
    if (const std::string base = base_of(dir / "Dockerfile"); !base.empty() && name != "base") {
        if (!image_exists(o.runtime, base)) {
            std::cerr << "template: " << base << " is missing; building the base first\n";
            if (int rc = build_one(o, "base", base); rc != k_exit_ok) {
                return rc;
            }
        }
    }
    std::cerr << "template: " << o.runtime << " build -t " << tag << ' ' << dir.string() << '\n';
    return run_child({o.runtime, "build", "-t", tag, "--", dir.string()}) == 0 ? k_exit_ok : k_exit_failed;
}

} // namespace

int run_template_build(const TemplateOptions& options) {
    if (auto st = recipe::check_recipe_name(options.name); !st) {
        report_error(options.global, make_error(ErrorCode::invalid_input, st.error().message, "NAME"));
        return k_exit_usage;
    }
    const std::string tag = options.tag.empty() ? "localhost/gpupool/" + options.name + ":latest" : options.tag;
    if (auto st = recipe::validate_image_reference(tag); !st) {
        report_error(options.global, make_error(ErrorCode::invalid_input, st.error().message, "--tag"));
        return k_exit_usage;
    }
    int rc = build_one(options, options.name, tag);
    if (rc == k_exit_ok) {
        std::cout << "Built " << tag << " with " << options.runtime << ".\n";
    }
    return rc;
}

void register_template(Cli& cli) {
    CLI::App* sub = add_command(cli, "template", "Build the research image templates (templates/)");
    add_help_footer(sub,
                    "gpupool template build torch-cpu            # from Debian packages, no registry\n"
                    "gpupool template build inspect --runtime docker --tag registry.example:5000/pool/inspect:1",
                    "templates/README.md", Reach::local);
    sub->require_subcommand(1);
    auto opts = std::make_shared<TemplateOptions>();
    CLI::App* build = sub->add_subcommand("build", "Build one template into a local image");
    build->fallthrough();
    build->add_option("name", opts->name, "Template: a folder of --from (base, inspect, torch-cpu, ...)")->required();
    build->add_option("--tag", opts->tag, "Image reference to tag it as (default localhost/gpupool/NAME:latest)");
    build->add_option("--runtime", opts->runtime, "Container engine")
        ->check(CLI::IsMember({"podman", "docker"}))
        ->capture_default_str();
    build->add_option("--from", opts->from, "The templates folder")->capture_default_str();
    build->callback([&cli, opts] {
        opts->global = cli.global;
        cli.exit_code = run_template_build(*opts);
    });
}

} // namespace gpupool::cmd

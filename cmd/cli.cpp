#include "cmd/cli_app.hpp"
#include "cmd/usage_errors.hpp"
#include "core/config/client_config.hpp"
#include "core/util/strings.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <string_view>
#include <vector>

namespace gpupool::cmd {

CLI::App* add_command(Cli& cli, const std::string& name, const std::string& description) {
    CLI::App* sub = cli.app.add_subcommand(name, description);
    sub->fallthrough();
    return sub;
}

void add_help_footer(CLI::App* sub, const std::string& examples, const std::string& doc, Reach reach) {
    std::string text = "Examples:\n";
    std::size_t start = 0;
    while (start < examples.size()) {
        const std::size_t end = examples.find('\n', start);
        text += "  " + examples.substr(start, end == std::string::npos ? std::string::npos : end - start) + "\n";
        start = end == std::string::npos ? examples.size() : end + 1;
    }
    text += reach == Reach::coordinator
                ? "Global options (before or after the command): --url URL, --token-file FILE (or --token, "
                  "GPUPOOL_TOKEN), --config FILE, --ca-cert PEM, --json, --log-level LEVEL\n"
                : "Global options (before or after the command): --json, --log-level LEVEL\n";
    text += "Docs: " + doc + "\n";
    sub->footer(text);
}

std::string default_data_dir() {
    if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) {
        return std::string(x) + "/gpupool";
    }
    const char* home = std::getenv("HOME");
    return std::string(home && *home ? home : ".") + "/.local/share/gpupool";
}

nlohmann::ordered_json error_json(const Error& e) {
    nlohmann::ordered_json j = {{"code", to_string(e.code)}, {"message", e.message}};
    if (!e.field.empty()) {
        j["field"] = e.field;
    }
    if (e.where) {
        j["file"] = e.where->file;
        if (e.where->line > 0) {
            j["line"] = e.where->line;
            j["column"] = e.where->column;
        }
    }
    return j;
}

namespace {

// describe(), less the field where the source already names it: `--set resources.gpus: ...`.
std::string describe(const Error& e) {
    if (e.where && e.where->line == 0 && !e.field.empty() && e.where->file == "--set " + e.field) {
        return e.where->file + ": " + e.message;
    }
    return e.describe();
}

void setup_logging(const std::string& level) {
    auto logger = spdlog::stderr_color_mt("gpupool");
    spdlog::set_default_logger(logger);
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
    spdlog::set_level(spdlog::level::from_str(level));
}

// Every top-level command, in the order `gpupool --help` lists them.
struct Command {
    std::string_view name;
    void (*declare)(Cli&);
};
constexpr Command k_commands[] = {
    {"coordinator", register_coordinator},
    {"worker", register_worker},
    {"submit", register_submit},
    {"run", register_run},
    {"status", register_status},
    {"pool", register_pool},
    {"jobs", register_jobs},
    {"logs", register_logs},
    {"cancel", register_cancel},
    {"retry", register_retry},
    {"fetch", register_fetch},
    {"manifest", register_manifest},
    {"wait", register_wait},
    {"credits", register_credits},
    {"price", register_price},
    {"model-memory", register_model_memory},
    {"recipe", register_recipe},
    {"admin", register_admin},
    {"sim", register_sim},
    {"login", register_login},
    {"template", register_template},
    {"version", register_version},
};

} // namespace

std::string_view command_in_argv(const CLI::App& app, int argc, const char* const* argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg(argv[i]);
        if (arg == "--" || arg == "--help-all") {
            return {};
        }
        if (!arg.starts_with("-")) {
            return arg;
        }
        if (arg.find('=') != std::string_view::npos) {
            continue; // --name=value
        }
        const CLI::Option* opt = app.get_option_no_throw(std::string(arg));
        if (opt == nullptr) {
            return {}; // not a global option: let the whole parser say what it is
        }
        if (opt->get_items_expected_min() > 0) {
            ++i; // its value, which may look like a command name (`--url run`)
        }
    }
    return {};
}

void report_error(const GlobalOptions& global, const Error& error) {
    if (global.json) {
        nlohmann::ordered_json errors = nlohmann::ordered_json::array();
        errors.push_back(error_json(error));
        for (const auto& more : error.more) {
            errors.push_back(error_json(more));
        }
        nlohmann::ordered_json out = {{"error", error_json(error)}, {"errors", errors}};
        std::cout << out.dump(2) << '\n';
        return;
    }
    // Messages can carry text from the coordinator (a name, a server's detail): escaped for the terminal.
    std::cerr << "error: " << util::escape_control(describe(error)) << '\n';
    for (const auto& more : error.more) {
        std::cerr << "error: " << util::escape_control(describe(more)) << '\n';
    }
}

int main(int argc, char** argv) {
    Cli cli;
    CLI::App& app = cli.app;
    app.require_subcommand(1);
    app.set_help_all_flag("--help-all", "Show help for every subcommand");
    app.add_flag("--json", cli.global.json, "Machine-readable JSON output on stdout");
    app.add_option("--log-level", cli.global.log_level, "Log level on stderr: trace, debug, info, warn, error, off")
        ->envname("GPUPOOL_LOG_LEVEL")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
    app.add_option("--config", cli.global.config_file, "Client config file (default ~/.config/gpupool/config.toml)");
    app.add_option("--url", cli.global.url, "Coordinator URL (overrides GPUPOOL_URL and the config file)");
    app.add_option("--token", cli.global.token,
                   "API token (overrides GPUPOOL_TOKEN and the config file; visible to other users in `ps`: "
                   "prefer --token-file or GPUPOOL_TOKEN)");
    app.add_option("--token-file", cli.global.token_file,
                   "File holding the API token (overrides GPUPOOL_TOKEN_FILE, GPUPOOL_TOKEN and the config file)");
    app.add_option("--ca-cert", cli.global.ca_cert, "PEM CA certificate that signs the coordinator's TLS certificate");
    app.footer("Docs: README.md, docs/recipes.md. Exit codes: 0 ok, 1 failed, 2 usage error.\n");

    // Only the command argv names is declared when it names one (its options and subcommands, all of
    // them): declaring all nineteen was most of a short command's own instructions and a third of
    // its page faults. Without one (no command, a misspelt one, --help, --help-all), all are.
    const std::string_view named = command_in_argv(app, argc, argv);
    const auto one = std::find_if(std::begin(k_commands), std::end(k_commands),
                                  [named](const Command& c) { return c.name == named; });
    if (one != std::end(k_commands)) {
        one->declare(cli);
    } else {
        for (const Command& c : k_commands) {
            c.declare(cli);
        }
    }

    app.parse_complete_callback([&cli, &app] {
        // The coordinator is a server: its operators read its log, so it says what happens (starts,
        // registrations, bans, grants, errors) unless told otherwise.
        const bool level_given = app.get_option("--log-level")->count() > 0 || config::real_env("GPUPOOL_LOG_LEVEL");
        const auto chosen = app.get_subcommands();
        const bool server = !chosen.empty() && chosen.front()->get_name() == "coordinator";
        setup_logging(server && !level_given ? std::string("info") : cli.global.log_level);
    });
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        GlobalOptions global = cli.global;
        global.json = global.json || json_in_argv(argc, argv);
        report_error(global, usage_error(e, app));
        return k_exit_usage;
    } catch (const ErrorException& e) {
        report_error(cli.global, e.error());
        return k_exit_failed;
    }
    return cli.exit_code;
}

} // namespace gpupool::cmd

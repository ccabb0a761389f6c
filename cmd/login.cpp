// `gpupool login URL`: checks a coordinator and a token, then writes them into the client config.
#include "cmd/login.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "core/api/admin.hpp"
#include "core/client/read_answer.hpp"

#include <termios.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>

namespace gpupool::cmd {

namespace {

// One line from stdin; on a terminal, asked for with the typing hidden.
Result<std::string> token_from_stdin() {
    const bool terminal = ::isatty(STDIN_FILENO) == 1;
    termios saved{};
    if (terminal) {
        std::cerr << "Paste your token (it is not shown), then press Enter: " << std::flush;
        if (::tcgetattr(STDIN_FILENO, &saved) == 0) {
            termios quiet = saved;
            quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
            ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
        }
    }
    std::string line;
    std::getline(std::cin, line);
    if (terminal) {
        ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
        std::cerr << '\n';
    }
    return config::parse_token_text(line, "the token read from stdin", "token");
}

// The token to log in with: --token-file, --token, else stdin.
Result<std::string> login_token(const GlobalOptions& global) {
    if (global.token_file) {
        return config::read_token_file(*global.token_file, "--token-file");
    }
    if (global.token) {
        return config::parse_token_text(*global.token, "--token", "--token");
    }
    return token_from_stdin();
}

std::filesystem::path config_path(const GlobalOptions& global) {
    return global.config_file ? std::filesystem::path(*global.config_file) : config::default_config_path(config::real_env);
}

} // namespace

int run_login(const LoginOptions& o) {
    const GlobalOptions& global = o.global;
    const auto file = config_path(global);
    if (file.empty()) {
        report_error(global, make_error(ErrorCode::invalid_input,
                                        "neither HOME nor XDG_CONFIG_HOME is set: name the file with --config",
                                        "--config"));
        return k_exit_usage;
    }
    auto token = login_token(global);
    if (!token) {
        report_error(global, token.error());
        return k_exit_usage;
    }
    config::ClientConfig cfg;
    cfg.url = o.url;
    cfg.url_source = "the URL given to login";
    if (global.ca_cert) {
        cfg.ca_cert = std::filesystem::absolute(*global.ca_cert).string();
    } else if (std::error_code ec; std::filesystem::exists(file, ec)) {
        // The certificate the config already trusts is kept, and used for the check.
        config::ClientOverrides only_file;
        only_file.config_file = file;
        if (auto existing = config::load_client_config(only_file, [](const char*) { return std::optional<std::string>(); })) {
            cfg.ca_cert = existing->ca_cert;
        }
    }
    // The coordinator answers at all, then it knows the token.
    client::ApiClient anonymous(cfg);
    if (auto health = anonymous.get("/v1/health"); !health) {
        Error e = health.error();
        e.message = "no gpupool coordinator answers at " + o.url + ": " + e.message;
        report_error(global, e);
        return k_exit_failed;
    }
    cfg.token = *token;
    cfg.token_source = global.token_file ? "--token-file " + *global.token_file : global.token ? "--token" : "stdin";
    client::ApiClient api(cfg);
    auto me = client::read_answer(api.get("/v1/whoami"), "GET /v1/whoami", wire::whoami_from_json);
    if (!me) {
        report_error(global, me.error());
        return k_exit_failed;
    }
    const std::string role = me->role;
    if (role == "enroll" || role == "worker") {
        report_error(global, make_error(ErrorCode::invalid_input,
                                        "this is " + std::string(role == "enroll" ? "an enrollment" : "a worker") +
                                            " token: it registers a GPU machine (`gpupool worker --share "
                                            "--token-file FILE`, docs/worker.md), it does not log a person in; "
                                            "ask your admin for a member token",
                                        "token"));
        return k_exit_failed;
    }
    if (auto st = config::write_client_config(file, cfg); !st) {
        report_error(global, st.error());
        return k_exit_failed;
    }
    if (global.json) {
        std::cout << nlohmann::json{{"url", o.url}, {"config", file.string()}, {"whoami", wire::to_json(*me)}}.dump(2)
                  << '\n';
        return k_exit_ok;
    }
    std::cout << "logged in to " << printable(o.url) << " as " << printable(role) << " " << printable(me->label);
    if (me->team) {
        std::cout << " of team " << printable(*me->team);
    }
    std::cout << "\nwrote " << file.string() << " (mode 0600); commands now use it unless --url, --token or "
              << "GPUPOOL_URL / GPUPOOL_TOKEN say otherwise\n";
    return k_exit_ok;
}

void register_login(Cli& cli) {
    auto o = std::make_shared<LoginOptions>();
    CLI::App* sub = add_command(cli, "login",
                                "Check a coordinator URL and a token, then save both in the client config "
                                "(the token is read from stdin, or --token-file)");
    sub->add_option("url", o->url, "The coordinator's URL, e.g. https://pool.example.org:7070")->required();
    add_help_footer(sub,
                    "gpupool login https://pool.example.org:7070       # paste the token when asked\n"
                    "gpupool --token-file ~/fellows.token login https://pool.example.org:7070\n"
                    "gpupool --ca-cert pool-ca.pem login https://pool.example.org:7070",
                    "README.md (Configuration); it writes ~/.config/gpupool/config.toml, or --config FILE",
                    Reach::coordinator);
    sub->callback([&cli, o] {
        o->global = cli.global;
        cli.exit_code = run_login(*o);
    });
}

} // namespace gpupool::cmd

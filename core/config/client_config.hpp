// Client configuration: where the coordinator is, how to authenticate to it, and which recipe
// repositories to read.
//
// Sources, later ones winning: built-in defaults, the config file
// (~/.config/gpupool/config.toml, or $XDG_CONFIG_HOME/gpupool/config.toml, or --config), the
// environment (GPUPOOL_URL, GPUPOOL_TOKEN_FILE, GPUPOOL_TOKEN, GPUPOOL_CA_CERT), then command-line
// flags (--token-file, then --token). A token file holds the token alone (surrounding whitespace
// is ignored); a file that is missing, unreadable or empty is an Error naming it. A missing
// default config file is fine; a missing file named with --config, a TOML error or an unknown key
// is an Error naming the file, line and key. Pure apart from reading the file; thread-safe.
#pragma once

#include "core/util/result.hpp"

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::config {

inline constexpr const char* k_default_url = "http://127.0.0.1:7070";

struct ClientConfig {
    std::string url = k_default_url;
    std::string token;
    std::string ca_cert; // PEM file to trust for a self-signed coordinator; empty = system CAs
    std::string url_source = "default"; // where `url` came from, for error messages
    std::string token_source = "nowhere"; // where `token` came from, for error messages
    // `recipes = ["URL", "PATH@rev", ...]`: the shared recipe repositories, searched in this order
    // (core/catalog). Each is checked as it is read (catalog::parse_repo_ref).
    std::vector<std::string> recipes;
};

struct ClientOverrides {
    std::optional<std::filesystem::path> config_file; // --config (must exist)
    std::optional<std::string> url;                   // --url
    std::optional<std::string> token;                 // --token
    std::optional<std::filesystem::path> token_file;  // --token-file
    std::optional<std::string> ca_cert;               // --ca-cert
};

using EnvLookup = std::function<std::optional<std::string>(const char*)>;

// The process environment.
std::optional<std::string> real_env(const char* name);

// The default config file path from HOME / XDG_CONFIG_HOME as seen through `env`.
std::filesystem::path default_config_path(const EnvLookup& env);

Result<ClientConfig> load_client_config(const ClientOverrides& overrides, const EnvLookup& env = real_env);

// A token from text (a file's or a line typed in): surrounding whitespace dropped; an empty text,
// one with inner spaces or control characters, or one over 4 KiB is an Error that names `what`,
// with `source` as its field.
Result<std::string> parse_token_text(std::string text, const std::string& what, const std::string& source);
Result<std::string> read_token_file(const std::filesystem::path& path, const std::string& source);

// Writes `url`, `token` and (when set) `ca_cert` into the config file, keeping the file's other
// keys; the file is replaced atomically with mode 0600 (it holds a secret), its directory created.
// An existing file that does not parse is an Error naming it, and is left as it is.
Status write_client_config(const std::filesystem::path& file, const ClientConfig& values);

} // namespace gpupool::config

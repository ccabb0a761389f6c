#include "core/config/client_config.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <map>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_client_config {

using namespace gpupool;
using namespace gpupool::config;

namespace {
EnvLookup env_of(std::map<std::string, std::string> vars) {
    return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
        auto it = vars.find(name);
        if (it == vars.end()) {
            return std::nullopt;
        }
        return it->second;
    };
}
} // namespace

TEST_CASE("client config: defaults without file or environment") {
    test::TempDir home;
    auto cfg = load_client_config({}, env_of({{"HOME", home.path().string()}}));
    REQUIRE(cfg);
    CHECK(cfg->url == k_default_url);
    CHECK(cfg->token.empty());
}

TEST_CASE("client config: file, then environment, then flags") {
    test::TempDir home;
    home.write(".config/gpupool/config.toml", "url = \"https://pool.example:8443\"\ntoken = \"file-token\"\n");
    auto env = std::map<std::string, std::string>{{"HOME", home.path().string()}};

    auto from_file = load_client_config({}, env_of(env));
    REQUIRE(from_file);
    CHECK(from_file->url == "https://pool.example:8443");
    CHECK(from_file->token == "file-token");

    env["GPUPOOL_TOKEN"] = "env-token";
    auto from_env = load_client_config({}, env_of(env));
    REQUIRE(from_env);
    CHECK(from_env->token == "env-token");
    CHECK(from_env->url == "https://pool.example:8443");

    ClientOverrides flags;
    flags.token = "flag-token";
    flags.url = "http://127.0.0.1:1";
    auto from_flags = load_client_config(flags, env_of(env));
    REQUIRE(from_flags);
    CHECK(from_flags->token == "flag-token");
    CHECK(from_flags->url == "http://127.0.0.1:1");
    CHECK(from_flags->url_source == "--url");
}

TEST_CASE("client config: a token from a file, kept out of the command line") {
    test::TempDir home;
    const auto file = home.write("token", "  gpp_from_file\n");
    auto env = std::map<std::string, std::string>{{"HOME", home.path().string()}};

    ClientOverrides flags;
    flags.token_file = file;
    auto cfg = load_client_config(flags, env_of(env));
    REQUIRE(cfg);
    CHECK(cfg->token == "gpp_from_file");
    CHECK(cfg->token_source == "--token-file " + file.string());

    env["GPUPOOL_TOKEN_FILE"] = file.string();
    auto from_env = load_client_config({}, env_of(env));
    REQUIRE(from_env);
    CHECK(from_env->token == "gpp_from_file");
    env["GPUPOOL_TOKEN"] = "env-token"; // the token itself wins over the file
    CHECK(load_client_config({}, env_of(env))->token == "env-token");
    CHECK(load_client_config(flags, env_of(env))->token == "gpp_from_file"); // a flag wins over both

    flags.token_file = home.path() / "missing";
    auto missing = load_client_config(flags, env_of(env));
    REQUIRE_FALSE(missing);
    CHECK(missing.error().field == "--token-file");
    CHECK_THAT(missing.error().message, Catch::Contains("missing"));
    for (const char* bad : {"\n \n", "gpp_a gpp_b\n"}) {
        flags.token_file = home.write("bad", bad);
        auto r = load_client_config(flags, env_of(env));
        REQUIRE_FALSE(r);
        CHECK(r.error().field == "--token-file");
    }
}

TEST_CASE("client config: XDG_CONFIG_HOME wins over HOME") {
    test::TempDir dir;
    dir.write("xdg/gpupool/config.toml", "url = \"http://xdg:1\"\n");
    auto cfg = load_client_config({}, env_of({{"HOME", dir.path().string()}, {"XDG_CONFIG_HOME", (dir.path() / "xdg").string()}}));
    REQUIRE(cfg);
    CHECK(cfg->url == "http://xdg:1");
}

TEST_CASE("client config: errors name the file, line and key") {
    test::TempDir home;
    auto file = home.write("c.toml", "url = \"http://x\"\ntokn = \"t\"\n");
    ClientOverrides o;
    o.config_file = file;
    auto cfg = load_client_config(o, env_of({}));
    REQUIRE_FALSE(cfg);
    CHECK(cfg.error().where->file == file.string());
    CHECK(cfg.error().where->line == 2);
    CHECK_THAT(cfg.error().message, Catch::Contains("did you mean `token`?"));

    o.config_file = home.path() / "missing.toml";
    auto missing = load_client_config(o, env_of({}));
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code == ErrorCode::not_found);

    auto bad_url = load_client_config({}, env_of({{"GPUPOOL_URL", "pool.example"}}));
    REQUIRE_FALSE(bad_url);
    CHECK_THAT(bad_url.error().message, Catch::Contains("GPUPOOL_URL"));
}

TEST_CASE("client config: several coordinator URLs (an active one and standbys), each http or https") {
    test::TempDir home;
    home.write(".config/gpupool/config.toml", "url = \"https://coord-1:7070, https://coord-2:7070\"\n");
    auto env = std::map<std::string, std::string>{{"HOME", home.path().string()}};
    auto cfg = load_client_config({}, env_of(env));
    REQUIRE(cfg);
    CHECK(cfg->url == "https://coord-1:7070, https://coord-2:7070");
    ClientOverrides flags;
    flags.url = "https://coord-1:7070,ftp://coord-2";
    auto bad = load_client_config(flags, env_of(env));
    REQUIRE_FALSE(bad);
    CHECK(bad.error().field == "url");
    CHECK_THAT(bad.error().message, Catch::Contains("separated by commas"));
}

} // namespace test_client_config
} // namespace

// Image references: what validate_image_reference accepts (the OCI distribution grammar) and what
// it refuses, with a message that says what is wrong. Table-driven.
#include "core/recipe/image_ref.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <functional>
#include <random>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_image_ref {

using namespace gpupool;
using namespace gpupool::recipe;

namespace {

const std::string k_sha256 = "sha256:" + std::string(64, 'a');

struct Bad {
    const char* title;
    std::string reference;
    const char* fragment;
};

} // namespace

TEST_CASE("image references: valid ones pass", "[recipe][image]") {
    const std::string valid[] = {
        "docker.io/library/ubuntu:22.04",
        "localhost/gpupool-test:latest",
        "localhost/gpupool/busybox:latest",
        "ghcr.io/org/img@" + k_sha256,
        "ghcr.io/org/img:v1.2@" + k_sha256,
        "registry:5000/a/b:tag",
        "python:3.11-slim",
        "busybox",
        "ubuntu",
        "a",
        "my-registry.example.com:443/team/image_name:Tag_1.0-rc",
        "[::1]:5000/img:1",
        "localhost:5000/x",
        "a.b/c__d/e---f/g.h_i",
        "img:" + std::string(128, 'x'),
        "img@sha512:" + std::string(128, '0'),
        std::string(255, 'a'),
        "Registry.Example.COM/lower/case",
    };
    for (const auto& ref : valid) {
        DYNAMIC_SECTION(ref) {
            auto st = validate_image_reference(ref);
            INFO((st ? std::string() : st.error().describe()));
            CHECK(st);
        }
    }
}

TEST_CASE("image references: invalid ones are refused and the message says why", "[recipe][image]") {
    const Bad bad[] = {
        {"an engine flag", "--privileged", "never starts with `-`"},
        {"a short flag with a mount", "-v/:/h", "never starts with `-`"},
        {"a long flag with a mount", "--volume=/:/host:rw", "never starts with `-`"},
        {"host network", "--network=host", "never starts with `-`"},
        {"root user", "--user=0", "never starts with `-`"},
        {"uppercase path", "UPPER/case", "is not lowercase"},
        {"uppercase after a registry", "docker.io/Library/ubuntu", "is not lowercase"},
        {"a space", "a b", "has no spaces"},
        {"a tab", "a\tb", "has no spaces"},
        {"empty", "", "must not be empty"},
        {"trailing colon", "busybox:", "gives no tag"},
        {"256-character name", std::string(256, 'a'), "at most 255"},
        {"very long", std::string(5000, 'a'), "at most 1024"},
        {"NUL byte", std::string("busybox\0--privileged", 20), "NUL"},
        {"escape sequence", "busy\x1b[2Jbox", "control characters"},
        {"non-ASCII", "bus\u00ffbox", "ASCII only"},
        {"tag starting with a dot", "img:.x", "tag"},
        {"tag too long", "img:" + std::string(129, 'x'), "tag"},
        {"empty component", "a//b", "empty path component"},
        {"trailing slash", "a/b/", "empty path component"},
        {"leading separator", "a/_b", "is invalid"},
        {"triple underscore", "a___b", "is invalid"},
        {"digest without algorithm", "img@abc", "algorithm:hex"},
        {"short sha256", "img@sha256:abc", "64 lowercase hex"},
        {"uppercase sha256", "img@sha256:" + std::string(64, 'A'), "64 lowercase hex"},
        {"unknown digest algorithm", "img@md5:" + std::string(32, 'a'), "not sha256 or sha512"},
        {"bad port", "registry:50x0/a", "port"},
        {"unclosed IPv6", "[::1/a", "never closes"},
        {"only a tag", ":latest", "names no image"},
        {"only a digest", "@" + k_sha256, "names no image"},
        {"bad host", "-x.io/a", "never starts with `-`"},
        {"host ending in a dash", "x-.io/a", "is not a host name"},
    };
    for (const Bad& b : bad) {
        DYNAMIC_SECTION(b.title) {
            auto st = validate_image_reference(b.reference);
            REQUIRE_FALSE(st);
            CHECK(st.error().code == ErrorCode::invalid_input);
            CHECK(st.error().field == "image");
            CHECK_THAT(st.error().message, Catch::Contains(b.fragment));
            // Whatever was refused is shown printable: no raw control byte reaches a terminal.
            for (char c : st.error().message) {
                CHECK(static_cast<unsigned char>(c) >= 0x20);
            }
        }
    }
}

// The hand-written token matchers replaced std::regex (a regex compiled in every `gpupool submit`
// process was a fifth of its instructions). The regexes stay here as the specification: on random
// strings over each token's alphabet plus a few foreign characters, matcher and regex agree.
TEST_CASE("image references: the token matchers agree with the grammar's regular expressions", "[recipe][image]") {
    struct Token {
        const char* name;
        std::regex re;
        std::function<bool(std::string_view)> matcher;
        std::string alphabet;
        std::size_t max_length;
        bool bracket_half = false; // put half of the strings in [ ], or valid ones are too rare
    };
    const std::vector<Token> tokens = {
        {"path component", std::regex("[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"), detail::is_path_component, "ab09._-A/",
         12},
        {"host name",
         std::regex("(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
                    "(?:\\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*"),
         detail::is_host_name, "aZ9.-_:", 12},
        {"IPv6 literal", std::regex("\\[[a-fA-F0-9:]+\\]"), detail::is_ipv6_literal, "[]:aF0g.", 8, true},
        {"port", std::regex("[0-9]{1,5}"), detail::is_port, "0123456789a", 7},
        {"tag", std::regex("[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"), detail::is_tag, "aZ9_.-:/", 12},
        {"sha256 hex", std::regex("[a-f0-9]{64}"), [](std::string_view s) { return recipe::is_lower_hex(s, 64); },
         "0af", 66},
    };
    std::mt19937 rng(20261203);
    for (const Token& t : tokens) {
        DYNAMIC_SECTION(t.name) {
            std::size_t accepted = 0;
            std::uniform_int_distribution<std::size_t> length(0, t.max_length);
            std::uniform_int_distribution<std::size_t> pick(0, t.alphabet.size() - 1);
            for (int i = 0; i < 20000; ++i) {
                std::string s(length(rng), ' ');
                for (char& c : s) {
                    c = t.alphabet[pick(rng)];
                }
                if (t.bracket_half && s.size() >= 2 && i % 2 == 0) {
                    s.front() = '[';
                    s.back() = ']';
                }
                const bool expected = std::regex_match(s, t.re);
                INFO("`" << s << "`");
                REQUIRE(t.matcher(s) == expected);
                accepted += expected ? 1 : 0;
            }
            // Both outcomes were exercised, not just refusals of noise.
            CHECK(accepted > 100);
            CHECK(accepted < 19900);
        }
    }
    // Lengths at the edges, which random strings of these sizes rarely hit.
    CHECK(detail::is_tag(std::string(128, 'x')));
    CHECK_FALSE(detail::is_tag(std::string(129, 'x')));
    CHECK(recipe::is_lower_hex(std::string(128, 'f'), 128));
    CHECK_FALSE(recipe::is_lower_hex(std::string(127, 'f'), 128));
}

} // namespace test_image_ref
} // namespace

// Percent-decoding and query strings on hostile input (core/net/url.hpp, on Boost.URL): what the
// server (request targets -> 400 or a Request) and the router (path segments) rely on.
#include "core/net/url.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_url {

using namespace gpupool::net;
using namespace std::string_literals;

TEST_CASE("url: malformed escapes fail wherever they are", "[net][url]") {
    for (const char* bad : {"%", "%4", "a%", "a%4", "%zz", "%4g", "%g4", "ab%-1", "%%41", "x%2"}) {
        INFO(bad);
        CHECK_FALSE(percent_decode(bad));
        CHECK_FALSE(percent_decode(bad, true));
        CHECK_FALSE(parse_query("k="s + bad));
        CHECK_FALSE(parse_query(bad + "=v"s));
    }
    // A bad escape anywhere in the query fails all of it, even after good pairs.
    CHECK_FALSE(parse_query("a=1&b=%zz&c=3"));
}

TEST_CASE("url: an encoded NUL is refused, a raw one is kept as it is", "[net][url]") {
    CHECK_FALSE(percent_decode("a%00b"));
    CHECK_FALSE(percent_decode("%00"));
    CHECK_FALSE(parse_query("k=a%00"));
    CHECK_FALSE(parse_query("a%00=1"));
    // "%2500" is "%" then "00", not a NUL.
    CHECK(percent_decode("%2500") == std::optional<std::string>("%00"));
    // The HTTP parser never lets a raw NUL through; the decoder leaves one alone.
    CHECK(percent_decode("a\0b"s) == std::optional<std::string>("a\0b"s));
}

TEST_CASE("url: bytes over 0x7f and other raw bytes decode to themselves", "[net][url]") {
    CHECK(percent_decode("caf\xc3\xa9") == std::optional<std::string>("caf\xc3\xa9"));
    CHECK(percent_decode("%C3%A9%c3%a9") == std::optional<std::string>("\xc3\xa9\xc3\xa9"));
    CHECK(percent_decode("%FF%fe") == std::optional<std::string>("\xff\xfe"));
    // Invalid UTF-8 is not this layer's business: bytes in, bytes out.
    CHECK(percent_decode("\xff") == std::optional<std::string>("\xff"));
    auto q = parse_query("name=caf\xc3\xa9&quote=\"x\"&brace={a}&hash=#&space=a b");
    REQUIRE(q);
    CHECK(q->at("name") == "caf\xc3\xa9");
    CHECK(q->at("quote") == "\"x\"");
    CHECK(q->at("brace") == "{a}");
    CHECK(q->at("hash") == "#");
    CHECK(q->at("space") == "a b");
}

TEST_CASE("url: query pairs: '+' is a space, empty pairs are skipped, the last value wins", "[net][url]") {
    auto q = parse_query("a=1+2&&b=x%2By&flag&=v&a=3&c=&d==e");
    REQUIRE(q);
    const std::map<std::string, std::string> want{{"a", "3"}, {"b", "x+y"}, {"flag", ""},
                                                  {"", "v"},  {"c", ""},    {"d", "=e"}};
    CHECK(*q == want);
    CHECK(parse_query("")->empty());
    CHECK(parse_query("&&&")->empty());
    CHECK(parse_query("a=1%26b%3D2")->at("a") == "1&b=2");
    // A path keeps '+' as it is.
    CHECK(percent_decode("a+b") == std::optional<std::string>("a+b"));
}

TEST_CASE("url: encoding keeps only unreserved characters and round-trips every byte", "[net][url]") {
    CHECK(percent_encode("AZaz09-._~") == "AZaz09-._~");
    CHECK(percent_encode("a b+c/d?e&f=g#h%") == "a%20b%2Bc%2Fd%3Fe%26f%3Dg%23h%25");
    std::string all;
    for (int c = 1; c < 256; ++c) {
        all.push_back(static_cast<char>(c));
    }
    const std::string enc = percent_encode(all);
    CHECK(enc.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~%") ==
          std::string::npos);
    CHECK(percent_decode(enc) == std::optional<std::string>(all));
    CHECK(parse_query("k=" + enc)->at("k") == all);
}

TEST_CASE("url: with_query encodes every key and value, and parse_query reads them back", "[net][url]") {
    CHECK(with_query("/v1/jobs", {}) == "/v1/jobs");
    CHECK(with_query("/v1/jobs", {{"sweep", "4"}, {"limit", "50"}}) == "/v1/jobs?sweep=4&limit=50");
    const std::string hostile = "a&b=c+d #e%f/g?h";
    const std::string target = with_query("/v1/jobs", {{"submitter", hostile}, {"mine", "1"}});
    const auto parts = split_target(target);
    CHECK(parts.path == "/v1/jobs");
    CHECK(parts.query.find('#') == std::string_view::npos);
    CHECK(parts.query.find(' ') == std::string_view::npos);
    auto q = parse_query(parts.query);
    REQUIRE(q);
    CHECK(*q == std::map<std::string, std::string>{{"submitter", hostile}, {"mine", "1"}});
}

} // namespace test_url
} // namespace

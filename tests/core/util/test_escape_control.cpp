#include "core/util/strings.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_escape_control {

using gpupool::util::escape_control;

TEST_CASE("escape_control makes a forged log line and terminal escapes visible") {
    // A worker name that tries to start a new log line, and one that sends a clear-screen sequence.
    CHECK(escape_control("w1\n[info] admin token: x") == "w1\\n[info] admin token: x");
    CHECK(escape_control("\x1b[2J\x1b]0;pwned\x07") == "\\x1b[2J\\x1b]0;pwned\\x07");
    CHECK(escape_control("a\rb\tc\x7f") == "a\\rb\\tc\\x7f");
}

TEST_CASE("escape_control escapes C1 controls and invalid UTF-8 but keeps real text") {
    CHECK(escape_control("\xc2\x9b" "31m") == "\\u009b31m"); // CSI as a C1 control
    CHECK(escape_control("caf\xc3\xa9 \xe2\x9c\x93") == "caf\xc3\xa9 \xe2\x9c\x93");
    CHECK(escape_control("\xff\xc0\x9b") == "\\xff\\xc0\\x9b"); // invalid and overlong bytes
    CHECK(escape_control("\xe2\x9c") == "\\xe2\\x9c");         // truncated sequence
}

TEST_CASE("escape_control with keep_lines passes newlines and tabs of a job's output") {
    CHECK(escape_control("line 1\n\tline 2\n", true) == "line 1\n\tline 2\n");
    CHECK(escape_control("ok\r\x1b[1Aoverwrite", true) == "ok\\r\\x1b[1Aoverwrite");
}

} // namespace test_escape_control
} // namespace

// Helpers shared by the tests: temporary directories and running the real gpupool binary.
#pragma once

#include "core/util/result.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::test {

// A fresh directory under the system temp dir, removed when the object goes away.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return m_path; }
    // Writes `text` to `name` inside the directory and returns its path.
    std::filesystem::path write(const std::string& name, const std::string& text) const;

private:
    std::filesystem::path m_path;
};

struct CliResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};

// Runs the built gpupool binary with `args` (no shell), capturing stdout and stderr.
CliResult run_gpupool(const std::vector<std::string>& args, const std::filesystem::path& cwd = {});
// The same, with `input` as its stdin (not a terminal).
CliResult run_gpupool_with_input(const std::vector<std::string>& args, const std::string& input);

std::filesystem::path source_dir();

// Polls `ok` every `every` until it holds or `within` has passed; returns its last answer.
bool eventually(const std::function<bool()>& ok, std::chrono::milliseconds within = std::chrono::seconds(10),
                std::chrono::milliseconds every = std::chrono::milliseconds(20));

// The whole file, bytes as they are (empty when it cannot be read).
std::string slurp(const std::filesystem::path& p);

// Writes `bytes` to `p` (replacing it).
void write_file(const std::filesystem::path& p, std::string_view bytes);

} // namespace gpupool::test

// Catch2 prints a Result as its Error (boost's own operator<< needs one for T too).
namespace Catch {
template <class T>
struct StringMaker<boost::system::result<T, gpupool::Error>> {
    static std::string convert(const boost::system::result<T, gpupool::Error>& r) {
        return r ? std::string("<ok>") : "<error: " + r.error().describe() + ">";
    }
};
} // namespace Catch

#include "tests/support.hpp"

#include <boost/process.hpp>

#include <atomic>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace gpupool::test {

namespace fs = std::filesystem;
namespace bp = boost::process;

TempDir::TempDir() {
    std::random_device rd;
    static std::atomic<int> counter{0};
    m_path = fs::temp_directory_path() /
             ("gpupool-test-" + std::to_string(rd()) + "-" + std::to_string(counter.fetch_add(1)));
    fs::create_directories(m_path);
}

TempDir::~TempDir() {
    std::error_code ec;
    fs::remove_all(m_path, ec);
}

fs::path TempDir::write(const std::string& name, const std::string& text) const {
    fs::path p = m_path / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p;
}


std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_file(const fs::path& p, std::string_view bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

CliResult run_gpupool(const std::vector<std::string>& args, const fs::path& cwd) {
    TempDir io;
    fs::path out = io.path() / "stdout";
    fs::path err = io.path() / "stderr";
    CliResult r;
    bp::child c(bp::exe = GPUPOOL_BINARY, bp::args = args, bp::std_out > out.string(), bp::std_err > err.string(),
                bp::std_in < bp::null, bp::start_dir = (cwd.empty() ? fs::current_path() : cwd).string());
    c.wait();
    r.exit_code = c.exit_code();
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
}

CliResult run_gpupool_with_input(const std::vector<std::string>& args, const std::string& input) {
    TempDir io;
    const fs::path in = io.write("stdin", input);
    const fs::path out = io.path() / "stdout";
    const fs::path err = io.path() / "stderr";
    CliResult r;
    bp::child c(bp::exe = GPUPOOL_BINARY, bp::args = args, bp::std_out > out.string(), bp::std_err > err.string(),
                bp::std_in < in.string());
    c.wait();
    r.exit_code = c.exit_code();
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
}

fs::path source_dir() { return GPUPOOL_SOURCE_DIR; }

bool eventually(const std::function<bool()>& ok, std::chrono::milliseconds within, std::chrono::milliseconds every) {
    const auto end = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < end) {
        if (ok()) {
            return true;
        }
        std::this_thread::sleep_for(every);
    }
    return ok();
}

} // namespace gpupool::test

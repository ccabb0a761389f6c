// Real gpupool processes for tests that kill, stop and restart them: a coordinator on a loopback
// port (ephemeral at first, the same one on restart) and a worker. Both are killed on destruction,
// and so are the worker's jobs.
#pragma once

#include "core/net/http_client.hpp"
#include "tests/support.hpp"
#include "worker/runtime/process_runtime.hpp"

#include <boost/process.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace gpupool::test {

// A coordinator child process. `port` 0 picks an ephemeral one; pass the old port to restart.
class CoordinatorProcess {
public:
    explicit CoordinatorProcess(const std::filesystem::path& dir, std::vector<std::string> extra = {},
                                std::uint16_t port = 0)
        : m_dir(dir) {
        namespace bp = boost::process;
        std::filesystem::remove(dir / "port");
        std::filesystem::remove(dir / "stdout"); // a restart must not read the first start's admin token
        std::vector<std::string> args{"coordinator", "--listen", "127.0.0.1:" + std::to_string(port), "--db",
                                      (dir / "pool.db").string(), "--port-file", (dir / "port").string(),
                                      "--tick-ms", "50"};
        args.insert(args.end(), extra.begin(), extra.end());
        // At the coordinator's own default log level (ctest sets GPUPOOL_LOG_LEVEL=warn for the tests).
        bp::environment env = boost::this_process::environment();
        env.erase("GPUPOOL_LOG_LEVEL");
        m_child = bp::child(bp::exe = GPUPOOL_BINARY, bp::args = args, env, bp::std_out > (dir / "stdout").string(),
                            bp::std_err > (dir / "stderr").string(), bp::std_in < bp::null);
        for (int i = 0; i < 400 && m_port == 0; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(25));
            std::ifstream in(dir / "port");
            in >> m_port;
        }
        INFO("coordinator stderr: " << slurp(dir / "stderr"));
        REQUIRE(m_port != 0);
        const std::string text = slurp(dir / "stdout");
        if (auto at = text.find("gpp_"); at != std::string::npos) {
            m_admin = text.substr(at, 68);
        }
    }
    ~CoordinatorProcess() {
        if (m_child.running()) {
            ::kill(m_child.id(), SIGTERM);
            m_child.wait();
        }
    }
    CoordinatorProcess(const CoordinatorProcess&) = delete;
    CoordinatorProcess& operator=(const CoordinatorProcess&) = delete;

    void kill9() {
        ::kill(m_child.id(), SIGKILL);
        m_child.wait();
    }
    int terminate_and_wait() {
        ::kill(m_child.id(), SIGTERM);
        m_child.wait();
        return m_child.exit_code();
    }
    void signal(int signo) { ::kill(m_child.id(), signo); }
    bool running() { return m_child.running(); }
    std::uint16_t port() const { return m_port; }
    const std::string& admin() const { return m_admin; }
    std::string stderr_text() const { return slurp(m_dir / "stderr"); }
    std::string url(const std::string& scheme = "http") const {
        return scheme + "://127.0.0.1:" + std::to_string(m_port);
    }

private:
    std::filesystem::path m_dir;
    boost::process::child m_child;
    std::uint16_t m_port = 0;
    std::string m_admin;
};

// `gpupool worker --share` with the process runtime, tuned for tests (fast heartbeats and polls).
class WorkerProcess {
public:
    // `poll_wait_ms`: the long poll's wait (short here so tests do not wait on it; the default is 20 s).
    WorkerProcess(const std::filesystem::path& work, const std::string& url, const std::string& token,
                  std::vector<std::string> extra = {}, const std::string& poll_wait_ms = "1000")
        : m_work(work) {
        namespace bp = boost::process;
        std::filesystem::create_directories(work);
        // An empty token passes none (a restart reuses worker.json; or `extra` names --token-file).
        std::vector<std::string> args{"--log-level", "info", "--url", url, "worker", "--share",
                                      "--runtime", "process", "--unsafe-process-runtime", "--work-dir",
                                      work.string(), "--heartbeat-ms", "300", "--poll-wait-ms", poll_wait_ms,
                                      "--cpus-milli", "4000", "--memory-mib", "4096"};
        args.insert(args.end(), extra.begin(), extra.end());
        if (!token.empty()) {
            args.insert(args.begin(), {"--token", token});
        }
        m_child = bp::child(bp::exe = GPUPOOL_BINARY, bp::args = args, bp::std_out > (work / "stdout").string(),
                            bp::std_err > (work / "stderr").string(), bp::std_in < bp::null);
    }
    ~WorkerProcess() {
        if (m_child.running()) {
            ::kill(m_child.id(), SIGKILL);
            m_child.wait();
        }
        // What a worker killed with SIGKILL leaves running (its jobs, in sessions of their own) is
        // killed by the next worker on the work dir; none comes after a test, so a runtime on its
        // state dir does it here (a job waiting for a file in a removed temp dir would wait forever).
        worker::ProcessRuntime reaper(m_work / "process-runtime", false);
    }
    WorkerProcess(const WorkerProcess&) = delete;
    WorkerProcess& operator=(const WorkerProcess&) = delete;

    void kill9() {
        ::kill(m_child.id(), SIGKILL);
        m_child.wait();
    }
    void signal(int signo) { ::kill(m_child.id(), signo); }
    // Waits for the process to exit (up to `within`); returns its exit code, or -1 if still running.
    int wait_exit(std::chrono::milliseconds within) {
        const auto end = std::chrono::steady_clock::now() + within;
        while (m_child.running() && std::chrono::steady_clock::now() < end) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        if (m_child.running()) {
            return -1;
        }
        m_child.wait();
        return m_child.exit_code();
    }
    std::string stderr_text() const { return slurp(m_work / "stderr"); }

private:
    std::filesystem::path m_work;
    boost::process::child m_child;
};

inline net::HttpClient http_client(const std::string& url, const std::string& token) {
    net::ClientOptions o;
    o.base_url = url;
    o.token = token;
    o.timeout = std::chrono::milliseconds(5'000);
    o.connect_timeout = std::chrono::milliseconds(1'000);
    return net::HttpClient(o);
}

} // namespace gpupool::test

// Systemctl: the few things `gpupool worker install/uninstall` asks of systemd, behind one small
// interface so that the installer is tested without systemd (RecordingSystemctl records the calls
// and can be told to fail one) and the real one is a single argv away from the command line.
//
// Every call is one `systemctl [--user] VERB ...` run; a non-zero exit is an Error (ErrorCode::io)
// with systemctl's own words. stop_disable() blocks until the unit has stopped: for the worker that
// is its drain (up to the unit's TimeoutStopSec). Not thread-safe; one installer uses one at a time.
#pragma once

#include "core/util/result.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace gpupool::worker {

class Systemctl {
public:
    virtual ~Systemctl() = default;
    virtual Status daemon_reload() = 0;
    virtual Status enable_start(const std::string& unit) = 0; // enable --now
    virtual Status try_restart(const std::string& unit) = 0;  // restart only if it runs
    virtual Status stop_disable(const std::string& unit) = 0; // disable --now: stops, waiting
};

// Runs `program` (normally "systemctl", found on PATH), with `--user` for a per-user service.
// systemctl's output goes to our stderr as it comes (it says what it links and starts).
class SystemctlCommand final : public Systemctl {
public:
    SystemctlCommand(std::string program, bool user);
    Status daemon_reload() override;
    Status enable_start(const std::string& unit) override;
    Status try_restart(const std::string& unit) override;
    Status stop_disable(const std::string& unit) override;

    // The argv of a call, as run (for messages and tests).
    std::vector<std::string> argv(const std::vector<std::string>& args) const;

private:
    Status run(const std::vector<std::string>& args);
    std::string m_program;
    bool m_user = false;
};

// The fake: records each call as one line ("daemon-reload", "enable --now gpupool-worker.service"),
// and fails the call whose line equals `fail_on` (with ErrorCode::io).
class RecordingSystemctl final : public Systemctl {
public:
    Status daemon_reload() override { return record("daemon-reload"); }
    Status enable_start(const std::string& unit) override { return record("enable --now " + unit); }
    Status try_restart(const std::string& unit) override { return record("try-restart " + unit); }
    Status stop_disable(const std::string& unit) override { return record("disable --now " + unit); }

    std::vector<std::string> calls{};
    std::string fail_on{};

private:
    Status record(std::string line) {
        calls.push_back(line);
        if (line == fail_on) {
            return make_error(ErrorCode::io, "systemctl " + line + " failed (fake)");
        }
        return {};
    }
};

} // namespace gpupool::worker

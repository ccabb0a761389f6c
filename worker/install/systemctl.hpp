// Systemctl: the few things `gpupool worker install/uninstall` and `gpupool coordinator
// install/uninstall` ask of systemd, behind one small
// interface so that the installer is tested without systemd (RecordingSystemctl records the calls
// and can be told to fail one) and the real one is a single argv away from the command line.
//
// Every call is one `systemctl [--user] VERB ...` run (create_system_users: one `systemd-sysusers`
// run); a non-zero exit is an Error (ErrorCode::io)
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
    virtual Status try_reload(const std::string& unit) = 0;   // try-reload-or-restart: only if it runs
    // Creates the system users and groups a sysusers.d file names (`config` as the machine sees it)
    // on the machine under `root` (`/`, or an image's root).
    virtual Status create_system_users(const std::filesystem::path& root, const std::filesystem::path& config) = 0;
};

// Runs `program` (normally "systemctl", found on PATH), with `--user` for a per-user service, and
// `sysusers` (normally "systemd-sysusers") with `--root=ROOT` when the root is not `/`.
// Their output goes to our stderr as it comes (what systemctl links and starts, the users made).
class SystemctlCommand final : public Systemctl {
public:
    SystemctlCommand(std::string program, bool user, std::string sysusers = "systemd-sysusers");
    Status daemon_reload() override;
    Status enable_start(const std::string& unit) override;
    Status try_restart(const std::string& unit) override;
    Status stop_disable(const std::string& unit) override;
    Status try_reload(const std::string& unit) override;
    Status create_system_users(const std::filesystem::path& root, const std::filesystem::path& config) override;

    // The argv of a call, as run (for messages and tests).
    std::vector<std::string> argv(const std::vector<std::string>& args) const;

private:
    Status run(const std::vector<std::string>& args);
    Status run_program(const std::string& program, const std::vector<std::string>& full);
    std::string m_program;
    bool m_user = false;
    std::string m_sysusers;
};

// The fake: records each call as one line ("daemon-reload", "enable --now gpupool-worker.service",
// "systemd-sysusers /etc/sysusers.d/gpupool-coordinator.conf"),
// and fails the call whose line equals `fail_on` (with ErrorCode::io).
class RecordingSystemctl final : public Systemctl {
public:
    Status daemon_reload() override { return record("daemon-reload"); }
    Status enable_start(const std::string& unit) override { return record("enable --now " + unit); }
    Status try_restart(const std::string& unit) override { return record("try-restart " + unit); }
    Status stop_disable(const std::string& unit) override { return record("disable --now " + unit); }
    Status try_reload(const std::string& unit) override { return record("try-reload-or-restart " + unit); }
    Status create_system_users(const std::filesystem::path& root, const std::filesystem::path& config) override {
        (void)root;
        return record("systemd-sysusers " + config.string());
    }

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

// The owner's first minute (issue 45): beside the token `gpupool admin enroll TEAM` prints, the one
// command a GPU owner runs on the machine to share, built from what the coordinator's GET /v1/dist
// says it hands out (`coordinator --dist DIR`, core/coordinator/dist.hpp).
//
// Rules for the command:
// - It downloads the install script and the static gpupool file from the pool's URL, and checks
//   each against a SHA-256 written in the command itself (the script's and, passed to it, the
//   file's and the pool CA's), so that what runs never depends on the transport or on what the
//   server says at download time. It works with curl or, failing that, wget.
// - The token is never in it: the script reads it from the terminal, standard input or a file.
// - Where the coordinator hands nothing out, or a command could not work (no static file; a pool
//   with its own CA that the coordinator does not serve as ca.pem, or one that differs from the
//   admin's --ca-cert), there is no command but one line that says how to make one.
// Pure functions of their inputs; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace gpupool::cmd {

struct JoinCommand {
    std::string command; // empty when none can work
    std::string note;    // why not and how to enable it, or a caution to print with the command
};

// `dist`: GET /v1/dist's answer; `url`: the pool as the admin reaches it; `admin_ca_sha256`: the
// SHA-256 of the admin's --ca-cert file ("" without one); `arch`: the machine name to prefer.
JoinCommand join_command(const nlohmann::json& dist, const std::string& url, const std::string& admin_ca_sha256,
                         const std::string& arch);

} // namespace gpupool::cmd

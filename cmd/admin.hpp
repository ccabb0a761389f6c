// `gpupool admin ...`: administering the pool with an admin token: teams, tokens (and enrollment
// tokens for GPU owners), workers (list, ban, drain, activate), credits (grants, adjustments,
// budgets, the report). Each subcommand is one request to the coordinator; the answer is printed.
// run_admin does the work for parsed options (tests call it without argv); register_admin
// (cli.hpp) wires it to the command line.
#pragma once

#include "cmd/cli.hpp"
#include "core/client/api_client.hpp"

#include <cstdint>
#include <string>

namespace gpupool::cmd {

enum class AdminAction : std::uint8_t {
    team_create,
    team_list,
    token_create,
    token_list,
    token_revoke,
    enroll,
    workers,
    ban,
    drain,
    activate,
    grant,
    adjust,
    budget,
    report,
    audit,
    backup,
};

// What the subcommands take; each reads the fields its action names.
struct AdminOptions {
    GlobalOptions global{};
    AdminAction action = AdminAction::team_list;
    std::string team{};          // team create: the new team's name; otherwise the team acted on
    std::int64_t weight = 1;     // team create: fair-share weight
    std::string role = "member"; // token create
    std::string label{};         // token create, enroll
    std::int64_t uses = 1;       // token create, enroll: workers an enrollment token may register
    bool all = false;            // token list: revoked tokens too
    std::string token{};         // token revoke: an id, or the label of one active token
    std::string worker{};        // ban, drain, activate: an id, or the name of one worker
    std::string void_since{};    // ban: a UTC time or a duration ago
    bool with_siblings = false;  // ban: the other workers enrolled with the same token too
    std::string amount{};        // grant, adjust: credits as an exact decimal
    std::string expires{};       // grant: a UTC date
    std::string note{};          // grant, adjust
    std::string member{};        // budget: a member token's label or id
    std::string day{};           // budget: credits per day, or "none"
    std::string week{};          // budget: credits per week, or "none"
    std::string since{};         // report, audit: a UTC date or a duration ago
    std::string action_prefix{}; // audit: actions starting with this ("credits.")
    std::int64_t limit = 50;     // audit: newest records shown
    std::string file{};          // backup: where the copy goes
    bool force = false;          // backup: replace an existing file
};

// The exit code (cli.hpp); problems are printed as it goes. A token that is not an admin's is told
// so before anything is asked ("needs an admin token", exit 1): some routes serve members their
// own team's part, which an admin command must not pass off as the pool's.
int run_admin(const AdminOptions& options);

// Whether `api`'s token is an admin's; if not (or if the coordinator cannot say), the problem is
// printed for `command` ("admin workers") and false returned.
bool require_admin(const GlobalOptions& global, client::ApiClient& api, const std::string& command);

// `admin audit` and `admin backup` (admin_ops.cpp).
int run_audit(const AdminOptions& options);
int run_backup(const AdminOptions& options);

// A UTC date ("2026-11-01", "2026-11-01T18:00:00Z") or a duration meaning that long ago ("7d"), as
// Unix milliseconds; errors name `flag`.
Result<std::int64_t> parse_since_ms(const std::string& text, const std::string& flag = "--since");

} // namespace gpupool::cmd

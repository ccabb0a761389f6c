// `gpupool admin audit` (the audit log) and `gpupool admin backup FILE` (a copy of the live pool).
#include "cmd/admin.hpp"
#include "cmd/remote.hpp"
#include "core/api/admin.hpp"
#include "core/client/read_answer.hpp"
#include "core/store/open_store.hpp"

#include <chrono>
#include <filesystem>
#include <iostream>

namespace gpupool::cmd {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// "alice (token 4)", or "this machine" for what was done with the database file itself.
std::string actor_text(const std::optional<wire::AuditActor>& actor) {
    if (!actor) {
        return "this machine";
    }
    return actor->label + " (token " + std::to_string(actor->id.value()) + ")";
}

// A URL query value: what is not a letter, digit or one of -._~ is percent-encoded.
std::string query_escape(const std::string& s) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        if (std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

} // namespace

int run_audit(const AdminOptions& o) {
    std::string path = "/v1/admin/audit?limit=" + std::to_string(o.limit);
    if (!o.since.empty()) {
        auto since = parse_since_ms(o.since);
        if (!since) {
            report_error(o.global, since.error());
            return k_exit_usage;
        }
        path += "&since=" + std::to_string(*since);
    }
    if (!o.action_prefix.empty()) {
        path += "&action=" + query_escape(o.action_prefix);
    }
    auto api = connect(o.global);
    if (!api || !require_admin(o.global, *api, "admin audit")) {
        return k_exit_failed;
    }
    auto r = client::read_answer(api->get(path), "GET /v1/admin/audit", wire::audit_list_from_json);
    if (!r) {
        report_error(o.global, r.error());
        return k_exit_failed;
    }
    if (o.global.json) {
        std::cout << wire::to_json(*r)["audit"].dump(2) << '\n';
        return k_exit_ok;
    }
    std::vector<std::vector<std::string>> rows{{"ID", "TIME (UTC)", "WHO", "ACTION", "TARGET", "DETAIL"}};
    for (const auto& a : r->audit) {
        rows.push_back(
            {std::to_string(a.id), format_time(a.at), actor_text(a.actor), a.action, a.target, a.detail.dump()});
    }
    if (rows.size() == 1) {
        std::cout << "no admin actions recorded" << (o.since.empty() && o.action_prefix.empty() ? "" : " that match")
                  << '\n';
        return k_exit_ok;
    }
    print_table(rows);
    return k_exit_ok;
}

int run_backup(const AdminOptions& o) {
    const fs::path to = o.file;
    std::error_code ec;
    if (fs::exists(to, ec) && !o.force) {
        report_error(o.global,
                     make_error(ErrorCode::invalid_input, "`" + to.string() + "` exists; --force replaces it", "file"));
        return k_exit_usage;
    }
    auto api = connect(o.global);
    if (!api || !require_admin(o.global, *api, "admin backup")) {
        return k_exit_failed;
    }
    // Downloaded beside the target (0600: tokens' hashes, the ledger, every team's outputs), checked,
    // then renamed over it: FILE is a whole backup or untouched.
    const fs::path partial = to.string() + ".partial";
    fs::remove(partial, ec);
    const auto started = std::chrono::steady_clock::now();
    auto st = api->download("POST", "/v1/admin/backup", partial, std::chrono::hours(6));
    Result<int> version = st ? store::check_backup_file(partial) : Result<int>(st.error());
    if (!version) {
        fs::remove(partial, ec);
        report_error(o.global, version.error());
        return k_exit_failed;
    }
    fs::rename(partial, to, ec);
    if (ec) {
        report_error(o.global, make_error(ErrorCode::io, "cannot rename `" + partial.string() + "` to `" + to.string() +
                                                             "`: " + ec.message()));
        return k_exit_failed;
    }
    const auto bytes = static_cast<std::int64_t>(fs::file_size(to, ec));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (o.global.json) {
        std::cout
            << json{{"file", to.string()}, {"bytes", bytes}, {"schema_version", *version}, {"seconds", seconds}}.dump()
            << '\n';
    } else {
        std::printf("backup written to %s: %.1f MiB, schema version %d, integrity checked, in %.1f s\n", to.c_str(),
                    static_cast<double>(bytes) / (1024.0 * 1024.0), *version, seconds);
        std::printf("restore it with: gpupool coordinator --db POOL.db --restore %s\n", to.c_str());
    }
    return k_exit_ok;
}

} // namespace gpupool::cmd

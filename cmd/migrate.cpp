// `gpupool admin migrate`: both stores opened here, copy_pool between them, the counts printed.
#include "cmd/migrate.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/secret_file.hpp"
#include "core/store/copy_pool.hpp"
#include "core/store/open_store.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>

namespace gpupool::cmd {

namespace {

// A side of the copy, opened: the source must exist; neither may be served by a coordinator now.
Result<std::unique_ptr<store::Store>> open_side(const std::string& spec, const std::string& password_file,
                                               bool source) {
    const std::string flag = source ? "--from" : "--to";
    auto parsed = store::parse_store_spec(spec);
    if (!parsed) {
        Error e = parsed.error();
        e.field = flag;
        return e;
    }
    store::OpenOptions oo;
    oo.create = !source;
    if (!password_file.empty()) {
        auto secret = read_secret_file(password_file, flag + "-password-file");
        if (!secret) {
            return secret.error();
        }
        oo.password = *secret;
    }
    auto opened = store::open_store(*parsed, oo);
    if (!opened) {
        Error e = opened.error();
        e.message = flag + " " + store::printable_spec(spec) + ": " + e.message;
        return e;
    }
    if ((*opened)->shared()) {
        auto lease = (*opened)->read_lease();
        if (!lease) {
            return lease.error();
        }
        if (lease->expires_in_ms > 0) {
            return make_error(ErrorCode::conflict,
                              "a coordinator at " + lease->address + " serves " + store::printable_spec(spec) +
                                  " (it holds the pool's lease); stop every coordinator on it first",
                              flag);
        }
    }
    return opened;
}

void print_report(const GlobalOptions& global, const MigrateOptions& o, const store::CopyReport& r) {
    if (global.json) {
        std::cout << nlohmann::json{{"from", store::printable_spec(o.from)},
                                    {"to", store::printable_spec(o.to)},
                                    {"teams", r.teams},
                                    {"tokens", r.tokens},
                                    {"workers", r.workers},
                                    {"sweeps", r.sweeps},
                                    {"jobs", r.jobs},
                                    {"attempts", r.attempts},
                                    {"ledger_entries", r.ledger_entries},
                                    {"grants", r.grants},
                                    {"audit_records", r.audit_records},
                                    {"samples", r.samples},
                                    {"log_bytes", r.log_bytes},
                                    {"outputs", r.outputs},
                                    {"input_blobs", r.input_blobs},
                                    {"evidence", r.evidence}}
                         .dump()
                  << std::endl;
        return;
    }
    std::cout << "copied " << store::printable_spec(o.from) << " to " << store::printable_spec(o.to)
              << " and checked the copy (every record equal, every log's ranges equal, the ledger balanced):\n"
              << "  " << r.teams << " teams, " << r.tokens << " tokens, " << r.workers << " workers\n"
              << "  " << r.sweeps << " sweeps, " << r.jobs << " jobs, " << r.attempts << " attempts, " << r.log_bytes
              << " bytes of logs, " << r.outputs << " outputs, " << r.input_blobs << " input archives, " << r.evidence
              << " pieces of evidence\n"
              << "  " << r.ledger_entries << " ledger entries, " << r.grants << " grants, " << r.audit_records
              << " audit records, " << r.samples << " utilisation samples" << std::endl;
}

} // namespace

int run_migrate(const GlobalOptions& global, const MigrateOptions& o) {
    auto from = open_side(o.from, o.from_password_file, true);
    if (!from) {
        report_error(global, from.error());
        return from.error().code == ErrorCode::invalid_input ? k_exit_usage : k_exit_failed;
    }
    auto to = open_side(o.to, o.to_password_file, false);
    if (!to) {
        report_error(global, to.error());
        return to.error().code == ErrorCode::invalid_input ? k_exit_usage : k_exit_failed;
    }
    auto report = store::copy_pool(**from, **to, [](const std::string& line) { spdlog::info("migrate: {}", line); });
    if (!report) {
        report_error(global, report.error());
        return k_exit_failed;
    }
    print_report(global, o, *report);
    return k_exit_ok;
}

void register_admin_migrate(Cli& cli, CLI::App* admin) {
    auto o = std::make_shared<MigrateOptions>();
    CLI::App* sub = admin->add_subcommand(
        "migrate", "Copy a whole pool from one store to another (SQLite to PostgreSQL, or back), verified; run it "
                   "where the databases are, with the coordinators stopped");
    sub->add_option("--from", o->from, "The pool to copy: a SQLite file or sqlite:PATH, or postgresql://...")
        ->required();
    sub->add_option("--to", o->to, "Where it goes (created if missing; must hold no pool yet)")->required();
    sub->add_option("--from-password-file", o->from_password_file, "--from's PostgreSQL password, one line");
    sub->add_option("--to-password-file", o->to_password_file, "--to's PostgreSQL password, one line");
    add_help_footer(sub,
                    "gpupool admin migrate --from /var/lib/gpupool/pool.db --to postgresql://gpupool@db/gpupool "
                    "--to-password-file /etc/gpupool/db.password",
                    "docs/operating.md (Running on PostgreSQL)", Reach::local);
    sub->callback([&cli, o] { cli.exit_code = run_migrate(cli.global, *o); });
}

} // namespace gpupool::cmd

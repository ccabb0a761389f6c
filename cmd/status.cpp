#include "cmd/status.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "core/credits/money.hpp"

#include <iostream>
#include <memory>

namespace gpupool::cmd {

int run_status(const StatusOptions& o) {
    const GlobalOptions& global = o.global;
    const std::int64_t job = o.job;
    auto api = connect(global);
    if (!api) {
        return k_exit_failed;
    }
    auto j = api->get("/v1/jobs/" + std::to_string(job));
    if (!j) {
        report_error(global, j.error());
        return k_exit_failed;
    }
    if (global.json) {
        std::cout << j->dump(2) << '\n';
        return k_exit_ok;
    }
    const auto& v = *j;
    std::cout << "job " << v["id"] << " `" << printable(v["name"]) << "` (sweep " << v["sweep_id"]
              << "): " << printable(v["state"]) << '\n';
    if (v["state"] == "queued") {
        std::cout << "  waiting: " << printable(v["waiting_reason"]) << '\n';
    } else if (!v["reason"].get<std::string>().empty()) {
        std::cout << "  " << printable(v["reason"]) << '\n';
    }
    if (!v["exit_code"].is_null()) {
        std::cout << "  exit code " << v["exit_code"] << '\n';
    }
    std::cout << "  submitted " << format_time(v["created_at"]) << " UTC";
    if (!v["finished_at"].is_null()) {
        std::cout << ", finished " << format_time(v["finished_at"]) << " UTC";
    }
    std::cout << '\n';
    if (v.contains("cost_micro")) {
        std::cout << "  credits: " << credits::format_credits(v["cost_micro"].get<std::int64_t>()) << " charged";
        if (v["held_micro"].get<std::int64_t>() > 0) {
            std::cout << ", " << credits::format_credits(v["held_micro"].get<std::int64_t>()) << " held in escrow";
        }
        std::cout << '\n';
    }
    if (!v["attempt_history"].empty()) {
        std::vector<std::vector<std::string>> rows{{"ATTEMPT", "WORKER", "GPU", "STATE", "STARTED", "ENDED", "EXIT", "CREDITS", "REASON"}};
        for (const auto& a : v["attempt_history"]) {
            rows.push_back({std::to_string(a["id"].get<std::int64_t>()), std::to_string(a["worker"].get<std::int64_t>()),
                            a["gpu_index"].get<std::int64_t>() < 0 ? "-" : std::to_string(a["gpu_index"].get<std::int64_t>()),
                            a["state"].get<std::string>() + (a.value("voided_at", nlohmann::json()).is_null() ? "" : " (voided)"),
                            format_time(a["started_at"]), format_time(a["ended_at"]),
                            a["exit_code"].is_null() ? "-" : std::to_string(a["exit_code"].get<std::int64_t>()),
                            credits::format_credits(a.value("cost_micro", std::int64_t{0})), a["reason"].get<std::string>()});
        }
        print_table(rows);
    }
    return k_exit_ok;
}

void register_status(Cli& cli) {
    auto o = std::make_shared<StatusOptions>();
    CLI::App* sub = add_command(cli, "status", "Show a job's state, attempts and why it is waiting");
    add_help_footer(sub, "gpupool status 12\ngpupool --json status 12", "README.md (Client commands)", Reach::coordinator);
    sub->add_option("job", o->job, "Job id")->required();
    sub->callback([&cli, o] {
        o->global = cli.global;
        cli.exit_code = run_status(*o);
    });
}

} // namespace gpupool::cmd

#include "cmd/remote.hpp"
#include "core/coordinator/auth.hpp"
#include "core/coordinator/coordinator.hpp"
#include "core/net/url.hpp"
#include "core/util/files.hpp"
#include "core/util/strings.hpp"
#include "worker/agent/archive.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

namespace gpupool::cmd {

using json = nlohmann::json;

config::ClientOverrides overrides(const GlobalOptions& global) {
    config::ClientOverrides o;
    if (global.config_file) {
        o.config_file = *global.config_file;
    }
    o.url = global.url;
    o.token = global.token;
    if (global.token_file) {
        o.token_file = *global.token_file;
    }
    o.ca_cert = global.ca_cert;
    return o;
}

std::optional<client::ApiClient> connect(const GlobalOptions& global) {
    auto cfg = config::load_client_config(overrides(global));
    if (!cfg) {
        report_error(global, cfg.error());
        return std::nullopt;
    }
    return client::ApiClient(*cfg);
}

std::string printable(std::string_view text) { return util::escape_control(text); }

std::string printable(const std::string& text) { return util::escape_control(text); }

std::string printable(const json& value) {
    return value.is_string() ? util::escape_control(value.get_ref<const std::string&>()) : value.dump();
}

std::string log_text_for_terminal(std::string_view data) { return util::escape_control(data, /*keep_lines=*/true); }

void print_table(const std::vector<std::vector<std::string>>& raw_rows) {
    if (raw_rows.empty()) {
        return;
    }
    std::vector<std::vector<std::string>> rows;
    rows.reserve(raw_rows.size());
    for (const auto& raw_row : raw_rows) {
        std::vector<std::string> row;
        row.reserve(raw_row.size());
        for (const auto& cell : raw_row) {
            row.push_back(printable(std::string_view(cell)));
        }
        rows.push_back(std::move(row));
    }
    std::vector<std::size_t> widths(rows.front().size(), 0);
    for (const auto& row : rows) {
        for (std::size_t c = 0; c < row.size() && c < widths.size(); ++c) {
            widths[c] = std::max(widths[c], row[c].size());
        }
    }
    for (const auto& row : rows) {
        std::string line;
        for (std::size_t c = 0; c < row.size(); ++c) {
            line += row[c];
            if (c + 1 < row.size()) {
                line += std::string(widths[c] - row[c].size() + 2, ' ');
            }
        }
        std::cout << line << '\n';
    }
}

std::string format_time(const json& ms) {
    if (!ms.is_number_integer()) {
        return "-";
    }
    std::time_t t = static_cast<std::time_t>(ms.get<std::int64_t>() / 1000);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

bool is_terminal_state(const std::string& state) {
    return state == "succeeded" || state == "failed" || state == "cancelled";
}

int count_unsuccessful(const std::vector<json>& jobs) {
    return static_cast<int>(
        std::count_if(jobs.begin(), jobs.end(), [](const json& j) { return j["state"] != "succeeded"; }));
}

std::optional<std::vector<json>> wait_for_jobs(const GlobalOptions& global, client::ApiClient& api,
                                               const std::vector<std::int64_t>& ids) {
    std::string last_line;
    while (true) {
        std::vector<json> jobs;
        std::map<std::string, int> counts;
        for (auto id : ids) {
            auto j = api.get("/v1/jobs/" + std::to_string(id));
            if (!j) {
                report_error(global, j.error());
                return std::nullopt;
            }
            counts[(*j)["state"].get<std::string>()]++;
            jobs.push_back(std::move(*j));
        }
        bool done = std::all_of(jobs.begin(), jobs.end(),
                                [](const json& j) { return is_terminal_state(j["state"].get<std::string>()); });
        if (!global.json) {
            std::string line;
            for (const auto& [state, n] : counts) {
                line += (line.empty() ? "" : ", ") + std::to_string(n) + " " + printable(state);
            }
            if (line != last_line) {
                std::cerr << "jobs: " << line << '\n';
                last_line = line;
            }
        }
        if (done) {
            return jobs;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
}

int stream_logs(const GlobalOptions& global, client::ApiClient& api, std::int64_t job, bool follow, bool raw) {
    const bool escape = !raw && ::isatty(STDOUT_FILENO) == 1;
    std::int64_t offset = 0;
    std::int64_t attempt = 0;
    std::int64_t finished_attempt = -1; // the last attempt printed to its end
    std::string told;                   // the last "waiting" line printed
    auto waits = std::chrono::steady_clock::time_point{};
    while (true) {
        std::string path = "/v1/jobs/" + std::to_string(job) + "/logs?offset=" + std::to_string(offset);
        if (attempt > 0) {
            path += "&attempt=" + std::to_string(attempt);
        }
        auto r = api.get(path);
        if (!r) {
            report_error(global, r.error());
            return k_exit_failed;
        }
        std::int64_t got_attempt = (*r)["attempt"].get<std::int64_t>();
        if (follow && got_attempt == 0 && !(*r)["finished"].get<bool>() &&
            std::chrono::steady_clock::now() >= waits) {
            // Not started yet: say why it waits (once per change), and keep waiting.
            waits = std::chrono::steady_clock::now() + std::chrono::seconds(2);
            if (auto j = api.get("/v1/jobs/" + std::to_string(job))) {
                const std::string why = j->value("waiting_reason", std::string());
                const std::string line = "-- job " + std::to_string(job) + " is " +
                                         j->value("state", std::string("queued")) + (why.empty() ? "" : ": " + why) +
                                         " --";
                if (line != told) {
                    std::cerr << printable(line) << std::endl;
                    told = line;
                }
            }
        }
        if (attempt == 0 && got_attempt == finished_attempt) {
            std::this_thread::sleep_for(std::chrono::milliseconds(300)); // waiting for the next attempt
            continue;
        }
        if (attempt == 0 && got_attempt > 0) {
            attempt = got_attempt; // stay on one attempt's stream; offsets are per attempt
        }
        const std::string& data = (*r)["data"].get_ref<const std::string&>();
        if (escape) {
            std::cout << log_text_for_terminal(data) << std::flush;
        } else {
            std::cout << data << std::flush;
        }
        offset = (*r)["next_offset"].get<std::int64_t>();
        if (!follow || (*r)["finished"].get<bool>()) {
            if (follow && attempt > 0) {
                // A retried job has a newer attempt: follow it too.
                auto j = api.get("/v1/jobs/" + std::to_string(job));
                if (j && !is_terminal_state((*j)["state"].get<std::string>())) {
                    finished_attempt = attempt;
                    std::cerr << "-- attempt " << attempt << " ended; following the job's next attempt --\n";
                    attempt = 0;
                    offset = 0;
                    continue;
                }
            }
            return k_exit_ok;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
}

namespace {

std::string mib_text(std::int64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
    return buf;
}

} // namespace

Status ship_inputs(client::ApiClient& api, std::vector<recipe::JobSpec>& jobs, const std::string& team,
                   const std::function<void(const std::string&)>& progress) {
    auto say = [&](const std::string& line) {
        if (progress) {
            progress(line);
        }
    };
    std::map<std::vector<std::string>, std::string> shipped; // resolved paths -> digest
    for (auto& job : jobs) {
        const auto& paths = job.inputs.resolved;
        if (paths.empty()) {
            continue;
        }
        if (auto it = shipped.find(paths); it != shipped.end()) {
            job.inputs.archive = it->second;
            continue;
        }
        // An unpredictable name, created 0600 and O_EXCL (nobody can plant a file or symlink there
        // first), removed when packed and read.
        std::error_code ec;
        auto tmp = util::TempFile::create(std::filesystem::temp_directory_path(ec), "gpupool-inputs-", ".tar");
        if (!tmp) {
            return tmp.error();
        }
        std::vector<std::filesystem::path> roots(paths.begin(), paths.end());
        say("inputs of `" + job.name + "`: packing " + std::to_string(paths.size()) +
            (paths.size() == 1 ? " path" : " paths") + " ...");
        auto packed = worker::pack_paths(roots, job.inputs.max_size_mib * 1024 * 1024, tmp->path());
        if (!packed) {
            return packed.error();
        }
        for (const auto& s : packed->skipped) {
            std::cerr << "warning: skipped " << printable(s) << '\n';
        }
        std::string bytes;
        {
            std::ifstream in(tmp->path(), std::ios::binary);
            bytes.assign(std::istreambuf_iterator<char>(in), {});
        }
        if (bytes.size() > coordinator::k_max_input_archive_bytes) {
            // Many small files: tar's 512-byte headers and padding can outgrow the files themselves.
            return make_error(ErrorCode::invalid_input,
                              "the inputs of job `" + job.name + "` pack to " + std::to_string(bytes.size()) +
                                  " bytes, over the coordinator's cap of " +
                                  std::to_string(coordinator::k_max_input_archive_bytes) +
                                  "; archive many small files into one, or fetch the data inside the job",
                              "inputs.paths");
        }
        const std::string sha = coordinator::sha256_hex(bytes);
        say("inputs of `" + job.name + "`: " + std::to_string(packed->files.size()) +
            (packed->files.size() == 1 ? " file, " : " files, ") + mib_text(packed->content_bytes) + "; uploading " +
            mib_text(static_cast<std::int64_t>(bytes.size())) + " ...");
        const auto started = std::chrono::steady_clock::now();
        auto put = api.put_bytes("/v1/inputs/" + sha + (team.empty() ? "" : "?team=" + net::percent_encode(team)), bytes);
        if (!put) {
            return put.error();
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        char took[32];
        std::snprintf(took, sizeof took, "%.1f s", seconds);
        say("inputs of `" + job.name + "`: uploaded in " + took + " (shared by every job with the same inputs)");
        shipped[paths] = sha;
        job.inputs.archive = sha;
    }
    return {};
}

} // namespace gpupool::cmd

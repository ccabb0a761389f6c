#include "cmd/remote.hpp"
#include "core/archive/archive.hpp"
#include "core/client/jobs_client.hpp"
#include "core/coordinator/coordinator.hpp"
#include "core/net/url.hpp"
#include "core/util/files.hpp"
#include "core/util/sha256.hpp"
#include "core/util/strings.hpp"
#include "core/util/time_text.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>
#include <unistd.h>

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

std::string printable(std::string_view text) {
    return util::escape_control(text);
}

std::string printable(const std::string& text) {
    return util::escape_control(text);
}

std::string printable(const json& value) {
    return value.is_string() ? util::escape_control(value.get_ref<const std::string&>()) : value.dump();
}

std::string log_text_for_terminal(std::string_view data) {
    return util::escape_control(data, /*keep_lines=*/true);
}

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

std::string format_time(std::int64_t ms) {
    return util::utc_text(ms);
}

std::string format_time(const std::optional<std::int64_t>& ms) {
    return ms ? format_time(*ms) : "-";
}

std::string format_time(const json& ms) {
    return ms.is_number_integer() ? format_time(ms.get<std::int64_t>()) : std::string("-");
}

bool is_terminal_state(const std::string& state) {
    return state == "succeeded" || state == "failed" || state == "cancelled";
}

int count_unsuccessful(const std::vector<wire::JobView>& jobs) {
    return static_cast<int>(
        std::count_if(jobs.begin(), jobs.end(), [](const wire::JobView& j) { return j.state != "succeeded"; }));
}

json jobs_json(const std::vector<wire::JobView>& jobs) {
    json out = json::array();
    for (const auto& j : jobs) {
        out.push_back(wire::to_json(j));
    }
    return out;
}

namespace {

// One look at the jobs: their states, and whether they have all ended. The coordinator answers when
// they have (or after `k_wait_slice`, for the progress line); one that predates POST /v1/jobs/wait is
// asked job by job every 500 ms instead.
constexpr std::chrono::milliseconds k_wait_slice{2'000};

Result<wire::JobWaitReply> look_at_jobs(client::JobsClient& pool, const std::vector<JobId>& ids, bool& server_waits) {
    if (server_waits) {
        auto w = pool.wait(ids, k_wait_slice);
        const bool older = !w && (w.error().code == ErrorCode::not_implemented ||
                                  (w.error().code == ErrorCode::not_found && w.error().field.empty()));
        if (!older) {
            return w;
        }
        server_waits = false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    wire::JobWaitReply reply;
    reply.done = true;
    for (JobId id : ids) {
        auto j = pool.job(id);
        if (!j) {
            return j.error();
        }
        reply.done = reply.done && is_terminal_state(j->state);
        reply.jobs.push_back({id, j->state, j->exit_code});
    }
    return reply;
}

} // namespace

std::optional<std::vector<wire::JobView>> wait_for_jobs(const GlobalOptions& global, client::ApiClient& api,
                                                        const std::vector<JobId>& ids, bool states_only) {
    client::JobsClient pool(api);
    std::string last_line;
    bool server_waits = true;
    std::vector<wire::JobView> jobs;
    for (bool done = false; !done;) {
        auto look = look_at_jobs(pool, ids, server_waits);
        if (!look) {
            report_error(global, look.error());
            return std::nullopt;
        }
        done = look->done;
        if (done && states_only) {
            std::map<JobId, const wire::JobProgress*> by_id;
            for (const auto& p : look->jobs) {
                by_id[p.id] = &p;
            }
            for (JobId id : ids) { // in the order asked; one missing from the answer: fetched whole below
                auto it = by_id.find(id);
                if (it == by_id.end()) {
                    jobs.clear();
                    break;
                }
                wire::JobView j;
                j.id = id;
                j.state = it->second->state;
                j.exit_code = it->second->exit_code;
                jobs.push_back(std::move(j));
            }
        }
        if (!global.json) {
            std::map<std::string, int> counts;
            for (const auto& j : look->jobs) {
                counts[j.state]++;
            }
            std::string line;
            for (const auto& [state, n] : counts) {
                line += (line.empty() ? "" : ", ") + std::to_string(n) + " " + printable(state);
            }
            if (line != last_line) {
                std::cerr << "jobs: " << line << '\n';
                last_line = line;
            }
        }
    }
    if (!jobs.empty()) {
        return jobs;
    }
    for (JobId id : ids) {
        auto j = pool.job(id);
        if (!j) {
            report_error(global, j.error());
            return std::nullopt;
        }
        jobs.push_back(std::move(*j));
    }
    return jobs;
}

namespace {

// While a followed job has not started: why it waits, once per change (and at most every 2 s).
void tell_waiting(client::JobsClient& pool, JobId job, std::string& told) {
    auto j = pool.job(job);
    if (!j) {
        return;
    }
    const std::string line = "-- job " + std::to_string(job.value()) + " is " + j->state +
                             (j->waiting_reason.empty() ? "" : ": " + j->waiting_reason) + " --";
    if (line != told) {
        std::cerr << printable(line) << std::endl;
        told = line;
    }
}

} // namespace

int stream_logs(const GlobalOptions& global, client::ApiClient& api, JobId job, bool follow, bool raw) {
    client::JobsClient pool(api);
    const bool escape = !raw && ::isatty(STDOUT_FILENO) == 1;
    std::int64_t offset = 0;
    AttemptId attempt{};            // the attempt being read (0: not known yet)
    AttemptId finished_attempt{-1}; // the last attempt printed to its end
    std::string told;               // the last "waiting" line printed
    auto waits = std::chrono::steady_clock::time_point{};
    while (true) {
        auto r = pool.logs(job, offset, attempt.value() > 0 ? std::optional<AttemptId>(attempt) : std::nullopt);
        if (!r) {
            report_error(global, r.error());
            return k_exit_failed;
        }
        const AttemptId got_attempt = r->attempt;
        if (follow && got_attempt.value() == 0 && !r->finished && std::chrono::steady_clock::now() >= waits) {
            // Not started yet: say why it waits (once per change), and keep waiting.
            waits = std::chrono::steady_clock::now() + std::chrono::seconds(2);
            tell_waiting(pool, job, told);
        }
        if (attempt.value() == 0 && got_attempt == finished_attempt) {
            std::this_thread::sleep_for(std::chrono::milliseconds(300)); // waiting for the next attempt
            continue;
        }
        if (attempt.value() == 0 && got_attempt.value() > 0) {
            attempt = got_attempt; // stay on one attempt's stream; offsets are per attempt
        }
        if (escape) {
            std::cout << log_text_for_terminal(r->data) << std::flush;
        } else {
            std::cout << r->data << std::flush;
        }
        offset = r->next_offset;
        if (!follow || r->finished) {
            if (follow && attempt.value() > 0) {
                // A retried job has a newer attempt: follow it too.
                auto j = pool.job(job);
                if (j && !is_terminal_state(j->state)) {
                    finished_attempt = attempt;
                    std::cerr << "-- attempt " << attempt.value() << " ended; following the job's next attempt --\n";
                    attempt = AttemptId{};
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
        auto packed = archive::pack_paths(roots, job.inputs.max_size_mib * 1024 * 1024, tmp->path());
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
        const std::string sha = util::sha256_hex(bytes);
        say("inputs of `" + job.name + "`: " + std::to_string(packed->files.size()) +
            (packed->files.size() == 1 ? " file, " : " files, ") + mib_text(packed->content_bytes) + "; uploading " +
            mib_text(static_cast<std::int64_t>(bytes.size())) + " ...");
        const auto started = std::chrono::steady_clock::now();
        net::QueryParams query;
        if (!team.empty()) {
            query.emplace_back("team", team);
        }
        auto put = api.put_bytes(net::with_query("/v1/inputs/" + sha, query), bytes);
        if (!put) {
            return put.error();
        }
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        char took[32];
        std::snprintf(took, sizeof took, "%.1f s", seconds);
        say("inputs of `" + job.name + "`: uploaded in " + took + " (shared by every job with the same inputs)");
        shipped[paths] = sha;
        job.inputs.archive = sha;
    }
    return {};
}

} // namespace gpupool::cmd

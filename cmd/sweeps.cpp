#include "cmd/sweeps.hpp"

#include "cmd/remote.hpp"
#include "core/client/jobs_client.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <thread>

namespace gpupool::cmd {

std::vector<std::string> folder_names(const std::vector<NamedJob>& jobs) {
    std::map<std::string, int> seen;
    for (const auto& j : jobs) {
        seen[j.name]++;
    }
    std::vector<std::string> out;
    out.reserve(jobs.size());
    for (const auto& j : jobs) {
        std::string n;
        for (char c : j.name) {
            n += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
        }
        if (n.empty() || n == "." || n == "..") {
            n = "job";
        }
        if (seen[j.name] > 1) {
            n += "-" + std::to_string(j.sweep_index);
        }
        out.push_back(n);
    }
    return out;
}

Result<std::vector<NamedJob>> sweep_jobs(client::ApiClient& api, SweepId sweep) {
    client::JobsQuery query;
    query.sweep = sweep;
    auto r = client::JobsClient(api).jobs(query);
    if (!r) {
        return r.error();
    }
    std::vector<NamedJob> out;
    for (const auto& j : r->jobs) {
        out.push_back({j.id, j.name, j.sweep_index});
    }
    if (out.empty()) {
        return make_error(ErrorCode::not_found,
                          "sweep " + std::to_string(sweep.value()) +
                              " has no jobs your token can see (`gpupool jobs` lists "
                              "your team's jobs with their sweeps)",
                          "--sweep");
    }
    return out;
}

Result<std::vector<NamedJob>> chosen_jobs(client::ApiClient& api, const std::vector<std::int64_t>& ids,
                                          std::int64_t sweep) {
    if (sweep > 0) {
        if (!ids.empty()) {
            return make_error(ErrorCode::invalid_input, "name jobs or --sweep, not both", "--sweep");
        }
        return sweep_jobs(api, SweepId(sweep));
    }
    if (ids.empty()) {
        return make_error(ErrorCode::invalid_input, "name the jobs (their ids) or a sweep (--sweep ID)", "jobs");
    }
    client::JobsClient pool(api);
    std::vector<NamedJob> out;
    for (auto id : ids) {
        auto j = pool.job(JobId(id));
        if (!j) {
            return j.error();
        }
        out.push_back({j->id, j->name, j->spec.sweep_index});
    }
    return out;
}

namespace {

// One job's place in its log while several are followed.
struct Followed {
    NamedJob job;
    std::string prefix;
    AttemptId attempt{};              // the attempt being read (0: not known yet)
    AttemptId finished_attempt{-1};   // the last attempt read to its end
    std::int64_t offset = 0;
    std::string partial{}; // bytes after the last newline
    bool done = false;
    bool succeeded = false;
};

void print_lines(Followed& f, std::string_view data, bool escape, bool flush_partial) {
    f.partial.append(data);
    std::size_t start = 0;
    for (std::size_t nl = f.partial.find('\n'); nl != std::string::npos; nl = f.partial.find('\n', start)) {
        const std::string_view line(f.partial.data() + start, nl - start);
        std::cout << f.prefix << (escape ? log_text_for_terminal(line) : std::string(line)) << '\n';
        start = nl + 1;
    }
    f.partial.erase(0, start);
    if (flush_partial && !f.partial.empty()) {
        std::cout << f.prefix << (escape ? log_text_for_terminal(f.partial) : f.partial) << '\n';
        f.partial.clear();
    }
    std::cout << std::flush;
}

// Reads what is new in one job's log; false on an error (already printed).
bool poll(const GlobalOptions& global, client::ApiClient& api, Followed& f, bool escape) {
    client::JobsClient pool(api);
    auto r = pool.logs(f.job.id, f.offset, f.attempt.value() > 0 ? std::optional<AttemptId>(f.attempt) : std::nullopt);
    if (!r) {
        report_error(global, r.error());
        return false;
    }
    if (r->attempt.value() == 0 && !r->finished) {
        return true; // not started yet
    }
    if (f.attempt.value() == 0 && r->attempt == f.finished_attempt) {
        return true; // the next attempt has not started yet
    }
    f.attempt = r->attempt;
    print_lines(f, r->data, escape, r->finished);
    f.offset = r->next_offset;
    if (!r->finished) {
        return true;
    }
    auto j = pool.job(f.job.id);
    if (!j) {
        report_error(global, j.error());
        return false;
    }
    if (!is_terminal_state(j->state)) {
        // Retried: its next attempt's log follows.
        f.finished_attempt = f.attempt;
        f.attempt = AttemptId{};
        f.offset = 0;
        return true;
    }
    f.done = true;
    f.succeeded = j->state == "succeeded";
    std::cerr << "-- " << printable(f.job.name) << " (job " << f.job.id.value() << ") " << printable(j->state) << " --"
              << std::endl;
    return true;
}

} // namespace

int follow_logs(const GlobalOptions& global, client::ApiClient& api, const std::vector<NamedJob>& jobs, bool raw) {
    const auto all_ok = follow_logs_to_end(global, api, jobs, raw);
    return all_ok && *all_ok ? k_exit_ok : k_exit_failed;
}

std::optional<bool> follow_logs_to_end(const GlobalOptions& global, client::ApiClient& api,
                                       const std::vector<NamedJob>& jobs, bool raw) {
    const bool escape = !raw && ::isatty(STDOUT_FILENO) == 1;
    const auto names = folder_names(jobs);
    std::size_t width = 0;
    for (const auto& n : names) {
        width = std::max(width, n.size());
    }
    std::vector<Followed> all;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        all.push_back({jobs[i], names[i] + std::string(width - names[i].size(), ' ') + " | "});
    }
    std::size_t left = all.size();
    while (left > 0) {
        for (auto& f : all) {
            if (f.done) {
                continue;
            }
            if (!poll(global, api, f, escape)) {
                return std::nullopt;
            }
            left -= f.done ? 1 : 0;
        }
        if (left > 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(400));
        }
    }
    return std::all_of(all.begin(), all.end(), [](const Followed& f) { return f.succeeded; });
}

void print_outcome(client::ApiClient& api, const std::vector<wire::JobView>& jobs,
                   const std::vector<std::string>& names) {
    const auto failed = static_cast<std::size_t>(count_unsuccessful(jobs));
    std::cout << (jobs.size() - failed) << " succeeded, " << failed << " did not" << (failed > 0 ? ":" : "") << '\n';
    client::JobsClient pool(api);
    std::size_t named = 0;
    for (std::size_t i = 0; i < jobs.size() && named < k_unsuccessful_named; ++i) {
        if (jobs[i].state == "succeeded") {
            continue;
        }
        ++named;
        wire::JobView j = jobs[i];
        if (j.name.empty() && j.reason.empty()) {
            if (auto whole = pool.job(j.id)) {
                j = std::move(*whole); // its reason; if it cannot be read, what the wait answer said will do
            }
        }
        const std::string& name = j.name.empty() && i < names.size() ? names[i] : j.name;
        std::cout << "  job " << j.id.value() << " " << printable(name) << ": " << printable(j.state)
                  << (j.exit_code ? " (exit " + std::to_string(*j.exit_code) + ")" : std::string())
                  << (j.reason.empty() ? std::string() : ": " + printable(j.reason)) << '\n';
    }
    if (failed > named) {
        std::cout << "  ... and " << (failed - named) << " more (`gpupool jobs` lists them with their states)\n";
    }
}

} // namespace gpupool::cmd

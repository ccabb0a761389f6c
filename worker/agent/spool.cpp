#include "worker/agent/spool.hpp"

#include "core/util/tree_fd.hpp"

#include "core/util/files.hpp"

#include <spdlog/spdlog.h>

#include <fstream>
#include <map>

namespace gpupool::worker {

namespace fs = std::filesystem;
using nlohmann::json;

Result<json> read_json_file(const fs::path& path) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
        // A folder in its place would open and then throw from the stream on the first read.
        return make_error(ErrorCode::not_found, "cannot read " + path.string() + ": not a regular file");
    }
    std::ifstream in(path);
    if (!in) {
        return make_error(ErrorCode::not_found, "cannot read " + path.string());
    }
    try {
        return Result<json>(boost::system::in_place_value, json::parse(in));
    } catch (const std::exception& e) { // json's parse errors, and the stream's read errors
        return make_error(ErrorCode::invalid_input, path.string() + ": " + e.what());
    }
}

// 0600 from the first byte (worker.json holds the worker's token), under an unpredictable temporary name.
Status write_json_file(const fs::path& path, const json& j) { return util::write_private_file(path, j.dump(2) + "\n"); }

namespace {

// An attempt's assignment.json and state.json: written in place (attempt_folders.hpp), not fsynced.
// The spool must outlive the worker process, which the page cache does; after a power cut the
// attempts' processes and containers are gone too, and what an older state.json would repeat (a
// start report, log bytes, an end) the coordinator takes once only. An fsync per save put several
// of them on the agent's thread per job (#12); on a slow disk each can take longer than the job.
Status write_spool_file(const fs::path& path, const json& j) {
    std::string error;
    if (!write_in_place(path, j.dump() + "\n", error)) {
        return make_error(ErrorCode::io, error);
    }
    return {};
}

Outcome outcome_from(const std::string& s) { return api::outcome_from_string(s).value_or(Outcome::exited); }

// The container labelled as attempt `id`'s, for an attempt whose state.json never named it.
std::map<std::string, FoundContainer>::iterator container_of(std::map<std::string, FoundContainer>& found,
                                                             AttemptId id) {
    const auto want = std::to_string(id.value());
    return std::find_if(found.begin(), found.end(), [&](const auto& c) {
        const auto label = c.second.labels.find("gpupool.attempt");
        return label != c.second.labels.end() && label->second == want;
    });
}

} // namespace

json Spool::state_json(const Attempt& t) {
    json j{{"container", t.container},
           {"phase", t.running() ? "running" : "ended"},
           {"start_reported", t.start_reported},
           {"shipped", t.shipped},
           {"outputs_done", t.outputs_done},
           {"reason", t.reason},
           {"outcome", to_string(t.outcome)},
           {"stop_reason", t.stop_reason},
           {"stop_outcome", to_string(t.stop_outcome)},
           {"outputs_error", t.outputs_error}};
    if (t.exit_code) {
        j["exit_code"] = *t.exit_code;
    }
    if (t.report) {
        j["report"] = api::to_json(*t.report);
    }
    return j;
}

void Spool::apply_state(Attempt& t, const json& s) {
    t.container = s.value("container", "");
    t.start_reported = s.value("start_reported", false);
    t.shipped = s.value("shipped", std::int64_t{0});
    t.outputs_done = s.value("outputs_done", false);
    t.reason = s.value("reason", "");
    t.outcome = outcome_from(s.value("outcome", "exited"));
    t.stop_reason = s.value("stop_reason", "");
    t.stop_outcome = outcome_from(s.value("stop_outcome", "exited"));
    t.outputs_error = s.value("outputs_error", "");
    if (s.contains("exit_code") && s["exit_code"].is_number_integer()) {
        t.exit_code = s["exit_code"].get<int>();
    }
    t.phase = s.value("phase", "running") == "ended" ? AttemptPhase::ended : AttemptPhase::running;
    // Absent from an older worker's state.json: then the attempt has none. One that does not read is
    // dropped, not guessed at: the rest of the state still holds.
    t.report.reset();
    if (const auto r = s.find("report"); r != s.end() && !r->is_null()) {
        if (auto report = api::run_report_from_json(*r)) {
            t.report = std::move(*report);
        } else {
            spdlog::warn("attempt {}: state.json's run report is unusable ({}: {}); it is sent without one",
                         t.a.attempt.value(), report.error().field, report.error().message);
        }
    }
}

Attempt Spool::create(api::Assignment assignment, std::int64_t now_ms, Status* spooled) {
    Attempt t;
    t.a = std::move(assignment);
    t.dir = m_folders.take(t.a.attempt);
    t.started_ms = now_ms;
    t.last_ship_ms = now_ms;
    Status st = write_spool_file(t.dir / "assignment.json", api::to_json(t.a));
    if (!st) {
        spdlog::error("attempt {}: {}", t.a.attempt.value(), st.error().message);
    }
    if (spooled != nullptr) {
        *spooled = std::move(st);
    }
    return t;
}

void Spool::save(const Attempt& t) const {
    if (auto st = write_spool_file(t.dir / "state.json", state_json(t)); !st) {
        spdlog::error("spool: {}", st.error().message);
    }
}

void Spool::save_unsaved(AttemptTable& attempts) const {
    for (auto& [id, t] : attempts) {
        if (t.unsaved) {
            save(t);
            t.unsaved = false;
        }
    }
}

std::vector<Attempt> Spool::load(std::int64_t now_ms) const {
    std::vector<Attempt> out;
    std::error_code ec;
    fs::create_directories(m_dir, ec);
    for (const auto& entry : fs::directory_iterator(m_dir, ec)) {
        auto a = read_json_file(entry.path() / "assignment.json");
        auto msg = a ? api::assignment_from_json(*a) : Result<api::Assignment>(a.error());
        if (!msg) {
            // Nothing to deliver it with: not even the attempt it was (a crash mid-create).
            spdlog::warn("spool: removing {}: {}", entry.path().string(), msg.error().message);
            (void)util::remove_tree(entry.path()); // follows no link the job left
            continue;
        }
        Attempt t;
        t.a = std::move(*msg);
        t.dir = entry.path();
        auto s = read_json_file(entry.path() / "state.json");
        try {
            if (s) {
                apply_state(t, *s);
            }
        } catch (const json::exception& e) {
            s = make_error(ErrorCode::invalid_input, (entry.path() / "state.json").string() + ": " + e.what());
        }
        if (!s) {
            // Created, perhaps started, never recorded (the worker stopped in between) or unreadable:
            // kept as a running attempt with no container on record, which recover() looks up by its
            // labels or reports lost. Dropping it would leave the coordinator to find out by the lease.
            spdlog::warn("spool: attempt {}: no usable state ({}); recovering it as running", t.id().value(),
                         s.error().message);
            Attempt unknown;
            unknown.a = std::move(t.a);
            unknown.dir = t.dir;
            t = std::move(unknown);
        }
        t.started_ms = now_ms; // max_runtime restarts from here: conservative for the job
        t.last_ship_ms = now_ms;
        out.push_back(std::move(t));
    }
    return out;
}

std::vector<Spool::Recovered> Spool::recover(ContainerRuntime& runtime, const std::string& worker_label,
                                             std::int64_t now_ms) const {
    std::map<std::string, FoundContainer> found;
    if (!runtime.capabilities().reattaches) {
        // Nothing to find: every attempt that was running is lost.
    } else if (auto list = runtime.list(worker_label)) {
        for (auto& c : *list) {
            // Only containers whose labels are exactly this worker's (never another pool's).
            auto label = c.labels.find("gpupool.worker");
            if (label != c.labels.end() && label->second == worker_label) {
                found[c.name] = c;
            }
        }
    } else {
        spdlog::warn("cannot list {} containers: {}", runtime.name(), list.error().message);
    }
    std::vector<Recovered> out;
    for (auto& t : load(now_ms)) {
        Recovered r{std::move(t), std::nullopt};
        Attempt& a = r.attempt;
        if (!a.running()) {
            // Ended before the restart: only its delivery is left.
        } else if (auto f = a.container.empty() ? container_of(found, a.id()) : found.find(a.container);
                   f != found.end() && f->second.labels["gpupool.attempt"] == std::to_string(a.id().value())) {
            a.container = f->first; // named by its labels when state.json was never written
            if (auto st = runtime.reattach(a.container, a.log_path()); st) {
                spdlog::info("attempt {}: re-attached to {}", a.id().value(), a.container);
            } else {
                r.lost = "the worker restarted and could not re-attach: " + st.error().message;
            }
        } else if (a.container.empty()) {
            r.lost = "the worker stopped before it recorded the job's start, and no " + runtime.name() +
                     " container of it was left to re-attach";
        } else {
            r.lost = "the worker restarted and the job's " + runtime.name() +
                     " container was gone (it cannot be re-attached)";
        }
        found.erase(a.container);
        out.push_back(std::move(r));
    }
    for (const auto& [name, c] : found) {
        spdlog::warn("removing container {} left by an earlier run (no spool for it)", name);
        (void)runtime.remove(name);
    }
    return out;
}

void Spool::remove(const Attempt& t, bool reusable) { m_folders.give_back(t.dir, reusable); }

void Spool::append_note(const Attempt& t, const std::string& text) {
    std::ofstream out(t.log_path(), std::ios::app | std::ios::binary);
    out << text;
}

} // namespace gpupool::worker

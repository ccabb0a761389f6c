#include "worker/agent/delivery.hpp"

#include "core/archive/archive.hpp"
#include "core/util/files.hpp"
#include "worker/agent/offer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace gpupool::worker {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

namespace {

constexpr std::size_t k_max_chunk = std::size_t{1} << 20; // bytes per log POST
constexpr std::int64_t k_eager_chunk = 64 * 1024;         // ship at once when this much is pending
// A stop whose reason the coordinator did not give: it does not know the attempt at all (or did not say).
constexpr const char* k_unknown_attempt = "the coordinator no longer knows this attempt";
constexpr const char* k_stopped = "stopped by the coordinator (cancelled, preempted or lost)";

std::int64_t file_size_or_zero(const fs::path& p) {
    std::error_code ec;
    const auto n = fs::file_size(p, ec);
    return ec ? 0 : static_cast<std::int64_t>(n);
}

std::string read_range(const fs::path& p, std::int64_t offset, std::size_t max) {
    std::ifstream in(p, std::ios::binary);
    if (!in) {
        return {};
    }
    in.seekg(offset);
    std::string buf(max, '\0');
    in.read(buf.data(), static_cast<std::streamsize>(max));
    buf.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
    return buf;
}

api::Completion completion_of(const Attempt& t) {
    return {t.exit_code ? std::optional<std::int64_t>(*t.exit_code) : std::nullopt, t.reason, t.outcome, t.report};
}

} // namespace

Delivery::Delivery(DeliveryOptions options, CoordinatorLink& link, const util::Clock& clock, Backoff backoff,
                   Hooks hooks)
    : m_opt(std::move(options)), m_link(link), m_clock(clock), m_backoff(backoff), m_hooks(std::move(hooks)) {}

bool Delivery::handle(AttemptTable& attempts, AttemptId id, const Error& e, const char* what) {
    if (net::is_tls_verification_failure(e)) {
        m_fatal = e;
        return false;
    }
    if (e.code == ErrorCode::unavailable) {
        const auto d = m_backoff.next_delay();
        m_offline_until_ms = m_clock.now_ms() + d.count();
        spdlog::warn("coordinator unreachable during {} ({}); retrying in {} ms", what, e.message, d.count());
        return false;
    }
    if (e.code == ErrorCode::conflict && id != AttemptId()) {
        if (Attempt* t = attempts.find(id)) {
            t->fenced = true;
            if (t->running()) {
                // Ask why in a heartbeat now (cancelled by its submitter, lost, preempted): its owner is
                // told that; deliver() stops it in this same pass, with or without an answer.
                m_ask_why.insert(id);
                heartbeat_now();
            }
        }
        spdlog::info("attempt {}: {} refused, the attempt is no longer current: {}", id.value(), what, e.message);
        return true;
    }
    spdlog::error("{} for attempt {}: {}", what, id.value(), e.message);
    if (id != AttemptId()) {
        if (Attempt* t = attempts.find(id); t && !t->running()) {
            t->fenced = true; // a request the coordinator will never take: give up on it
        }
    }
    return true;
}

void Delivery::heartbeat_if_due(AttemptTable& attempts, const std::function<Facts()>& facts) {
    const auto now = m_clock.now_ms();
    if (now < m_next_heartbeat_ms || !online()) {
        return;
    }
    Facts f = facts();
    api::Heartbeat beat;
    for (const auto& [id, t] : attempts) {
        if (!t.fenced || m_ask_why.count(id) != 0) {
            beat.running.push_back(id); // a refused one too, so the coordinator says why it stops
        }
    }
    beat.running.insert(beat.running.end(), f.waiting.begin(), f.waiting.end()); // they keep their lease while they wait
    // Only GPUs of the inventory: the coordinator numbers GPUs by it and refuses indexes past its cap.
    beat.unhealthy_gpus = inventory_indexes(f.unhealthy_gpus, f.inventory);
    beat.reclaimed_gpus = inventory_indexes(f.reclaimed_gpus, f.inventory);
    beat.draining = f.draining;
    // The inventory goes with the first heartbeat after a start, and again whenever it changed (the
    // owner reloaded worker.toml): the machine may differ from when it registered.
    const bool send_inventory = !m_inventory_sent || !(m_sent_inventory == f.inventory);
    if (send_inventory) {
        beat.inventory = f.inventory;
    }
    beat.sharing = f.sharing;
    beat.sharing_changes_at_ms = f.sharing_changes_at_ms;
    beat.terms = f.terms;
    beat.gpu_memory_used_mib = f.gpu_memory_used_mib;
    beat.fetching = f.fetching;
    auto hb = m_link.heartbeat(beat);
    if (!hb && net::is_tls_verification_failure(hb.error())) {
        m_fatal = hb.error(); // a wrong CA stays wrong: stop rather than retry forever
        return;
    }
    if (!hb && send_inventory && hb.error().code == ErrorCode::invalid_input) {
        spdlog::error("the coordinator refused this worker's inventory ({}); it keeps the one it had",
                      hb.error().message);
        m_inventory_sent = true;
        m_sent_inventory = f.inventory;
        return; // the next pass sends a plain heartbeat
    }
    if (!hb) {
        const auto code = hb.error().code;
        if (code == ErrorCode::unauthorized || code == ErrorCode::forbidden) {
            // Banned, or a pool that no longer knows us: nothing here will work again.
            m_fatal = make_error(code, "the coordinator refused this worker (" + hb.error().message +
                                           "); if the pool was reset, delete " +
                                           (m_opt.work_dir / "worker.json").string() + " to register again");
            return;
        }
        handle(attempts, AttemptId(), hb.error(), "heartbeat");
        return;
    }
    delivered();
    m_inventory_sent = true;
    m_sent_inventory = f.inventory;
    if (hb->lease_ms > 0) {
        m_lease_ms = hb->lease_ms;
    }
    const auto interval = std::min<milliseconds>(m_opt.heartbeat, milliseconds(std::max<std::int64_t>(m_lease_ms / 3, 100)));
    m_next_heartbeat_ms = now + interval.count();
    obey(*hb, attempts);
}

void Delivery::obey(const api::HeartbeatReply& answer, AttemptTable& attempts) {
    for (auto id : answer.stop) {
        auto said = std::find_if(answer.stop_reasons.begin(), answer.stop_reasons.end(),
                                 [&](const api::StopReason& s) { return s.attempt == id; });
        const std::string why = said != answer.stop_reasons.end() && !said->reason.empty() ? said->reason
                                : m_ask_why.count(id) != 0                                 ? k_unknown_attempt
                                                                                           : k_stopped;
        m_ask_why.erase(id);
        if (m_hooks.cancel_waiting(id)) {
            spdlog::info("attempt {}: cancelled while it waited for its GPU share", id.value());
            continue;
        }
        Attempt* t = attempts.find(id);
        if (!t) {
            continue;
        }
        t->fenced = true;
        if (t->running()) {
            m_hooks.stop(*t, why);
        }
    }
}

bool Delivery::ship_logs(AttemptTable& attempts, Attempt& t, bool flush) {
    const fs::path log = t.log_path();
    for (;;) {
        const std::int64_t size = file_size_or_zero(log);
        if (size <= t.shipped) {
            return true;
        }
        const auto pending = size - t.shipped;
        if (!flush && pending < k_eager_chunk && m_clock.now_ms() - t.last_ship_ms < m_opt.log_flush.count()) {
            return true;
        }
        const std::string chunk = read_range(log, t.shipped, std::min<std::size_t>(k_max_chunk, static_cast<std::size_t>(pending)));
        if (chunk.empty()) {
            return true;
        }
        auto r = m_link.append_log(t.a.attempt, t.shipped, chunk);
        if (!r) {
            return handle(attempts, t.a.attempt, r.error(), "log upload");
        }
        delivered();
        t.shipped = std::max(*r, t.shipped + static_cast<std::int64_t>(chunk.size()));
        t.last_ship_ms = m_clock.now_ms();
        t.unsaved = true;
    }
}

void Delivery::outputs_failed(Attempt& t, const std::string& why) {
    // Over the cap (or unreadable): the job fails with the reason, and its log says so.
    t.outputs_error = why;
    t.outputs_done = true;
    t.exit_code = (t.exit_code && *t.exit_code != 0) ? *t.exit_code : 1;
    t.reason = "outputs not uploaded: " + why;
    Spool::append_note(t, "gpupool-worker: " + t.reason + "\n");
    t.unsaved = true;
}

void Delivery::note_skipped(const Attempt& t, const std::vector<std::string>& skipped) {
    for (const auto& s : skipped) {
        spdlog::warn("attempt {}: outputs: skipped {}", t.a.attempt.value(), s);
        Spool::append_note(t, "gpupool-worker: outputs: skipped " + s + "\n");
    }
}

bool Delivery::pack_outputs_once(Attempt& t) {
    const fs::path tar = t.dir / "outputs.tar"; // packed once, kept until uploaded (across restarts)
    std::error_code ec;
    if (fs::is_regular_file(fs::symlink_status(tar, ec))) {
        return true;
    }
    const std::int64_t cap = t.a.spec.outputs.max_size_mib * 1024 * 1024;
    // Packed under an unpredictable name (created O_EXCL, 0600), then renamed into place.
    auto tmp = util::TempFile::create(t.dir, ".outputs-", ".tar");
    auto packed = tmp ? archive::pack_outputs(t.dir / "outputs", t.a.spec.outputs.paths, cap, tmp->path())
                      : Result<archive::PackedOutputs>(tmp.error());
    if (packed) {
        if (auto st = tmp->rename_to(tar); !st) {
            packed = st.error();
        }
    }
    if (!packed) {
        outputs_failed(t, packed.error().message);
        return false;
    }
    note_skipped(t, packed->skipped);
    return true;
}

// Outputs up to this size (a results file, or nothing at all: most jobs) are packed in memory and
// sent at once; larger ones go through outputs.tar, which survives a restart of the worker.
constexpr std::int64_t k_small_outputs_bytes = 1024 * 1024;

bool Delivery::upload_outputs(AttemptTable& attempts, Attempt& t) {
    if (t.outputs_done) {
        return true;
    }
    const fs::path tar = t.dir / "outputs.tar";
    std::optional<std::string> archive; // in memory: no file to write, read and remove
    std::error_code ec;
    const bool packed_before = fs::is_regular_file(fs::symlink_status(tar, ec)); // by this worker before a restart
    if (!packed_before) {
        const std::int64_t cap = t.a.spec.outputs.max_size_mib * 1024 * 1024;
        auto small = archive::pack_small_outputs(t.dir / "outputs", t.a.spec.outputs.paths, cap, k_small_outputs_bytes);
        if (!small) {
            outputs_failed(t, small.error().message);
            return true;
        }
        if (*small) {
            note_skipped(t, (*small)->packed.skipped);
            if ((*small)->packed.files.empty()) {
                // Nothing to send: the coordinator answers an empty archive for a job that succeeded
                // without outputs. Most short jobs write none; a request each was a third of a
                // 32-slot worker's turn (#12).
                t.outputs_done = true;
                t.unsaved = true;
                return true;
            }
            archive = std::move((*small)->archive);
        }
    }
    const bool from_file = !archive;
    if (from_file) {
        if (!pack_outputs_once(t)) {
            return true;
        }
        std::ifstream in(tar, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        archive = ss.str();
    }
    auto st = m_link.upload_outputs(t.a.attempt, *archive);
    if (!st) {
        return handle(attempts, t.a.attempt, st.error(), "outputs upload");
    }
    delivered();
    t.outputs_done = true;
    t.unsaved = true;
    if (from_file) {
        fs::remove(tar, ec);
    }
    return true;
}

bool Delivery::deliver_one(AttemptTable& attempts, Attempt& t, bool& done, bool& ended_now) {
    const auto id = t.id();
    if (t.fenced) {
        done = !t.running();
        return true;
    }
    if (!t.start_reported && !t.container.empty()) {
        if (auto st = m_link.start(id); !st) {
            return handle(attempts, id, st.error(), "start");
        }
        delivered();
        t.start_reported = true;
        t.unsaved = true;
    }
    const bool ended = !t.running();
    if (!ship_logs(attempts, t, ended)) {
        return false;
    }
    if (!ended || t.fenced) {
        return true;
    }
    if (!upload_outputs(attempts, t)) {
        return false;
    }
    if (t.fenced) {
        return true;
    }
    // A final look: our own notes may have been appended after the last chunk.
    if (!ship_logs(attempts, t, true)) {
        return false;
    }
    ended_now = !t.fenced;
    return true;
}

void Delivery::complete_all(AttemptTable& attempts, const std::vector<api::AttemptEnd>& ends,
                            std::vector<AttemptId>& done) {
    auto answers = m_link.complete_many(ends);
    if (!answers) {
        if (answers.error().code == ErrorCode::unavailable || net::is_tls_verification_failure(answers.error())) {
            handle(attempts, AttemptId(), answers.error(), "complete");
            return;
        }
        for (const auto& e : ends) { // refused as a whole: as if each was
            handle(attempts, e.attempt, answers.error(), "complete");
        }
        return;
    }
    delivered();
    for (const auto& a : *answers) {
        const bool asked = std::any_of(ends.begin(), ends.end(), [&](const api::AttemptEnd& e) { return e.attempt == a.attempt; });
        if (!asked || std::find(done.begin(), done.end(), a.attempt) != done.end()) {
            continue; // an answer about something not asked (or twice) proves nothing
        }
        if (!a.error) {
            done.push_back(a.attempt);
        } else {
            handle(attempts, a.attempt, *a.error, "complete");
        }
    }
}

void Delivery::report_starts(AttemptTable& attempts) {
    std::vector<AttemptId> ids;
    for (const auto& [id, t] : attempts) {
        if (!t.start_reported && !t.container.empty() && !t.fenced && ids.size() < api::k_max_batch_starts) {
            ids.push_back(id);
        }
    }
    if (ids.empty()) {
        return;
    }
    auto answers = m_link.start_many(ids);
    if (!answers) {
        if (answers.error().code == ErrorCode::unavailable || net::is_tls_verification_failure(answers.error())) {
            handle(attempts, AttemptId(), answers.error(), "start");
            return;
        }
        for (AttemptId id : ids) { // refused as a whole: as if each was
            handle(attempts, id, answers.error(), "start");
        }
        return;
    }
    delivered();
    for (const auto& a : *answers) {
        Attempt* t = attempts.find(a.attempt);
        if (std::find(ids.begin(), ids.end(), a.attempt) == ids.end() || !t) {
            continue; // an answer about something not asked proves nothing
        }
        if (!a.error) {
            t->start_reported = true;
            t->unsaved = true;
        } else {
            handle(attempts, a.attempt, *a.error, "start");
        }
    }
}

std::vector<AttemptId> Delivery::deliver(AttemptTable& attempts, const std::function<Facts()>& facts) {
    std::vector<AttemptId> done;
    if (!online()) {
        return done;
    }
    heartbeat_if_due(attempts, facts);
    if (online()) {
        report_starts(attempts);
    }
    std::vector<api::AttemptEnd> ends;
    for (auto& [id, t] : attempts) {
        bool finished = false;
        bool ended = false;
        if (!online() || !deliver_one(attempts, t, finished, ended)) {
            break;
        }
        if (finished) {
            done.push_back(id);
        } else if (ended && ends.size() < api::k_max_batch_completions) {
            ends.push_back({id, completion_of(t)});
        }
    }
    if (!ends.empty() && online()) {
        complete_all(attempts, ends, done);
    }
    if (!m_ask_why.empty()) {
        heartbeat_if_due(attempts, facts); // due now: learns why they were refused
        for (AttemptId id : m_ask_why) {   // no answer: stop them all the same
            if (Attempt* t = attempts.find(id); t && t->running()) {
                m_hooks.stop(*t, k_unknown_attempt);
            }
        }
        m_ask_why.clear();
    }
    return done;
}

void Delivery::hand_back(AttemptTable& attempts) {
    std::vector<HandBack>& ids = attempts.hand_backs();
    AttemptTable none;
    while (!ids.empty() && online()) {
        const auto id = ids.back().attempt;
        if (attempts.holds(id)) {
            ids.pop_back();
            continue;
        }
        auto st = m_link.complete(id, {std::nullopt, ids.back().why, Outcome::owner_preempted});
        if (!st && !handle(none, AttemptId(), st.error(), "hand back")) {
            return;
        }
        ids.pop_back();
    }
}

} // namespace gpupool::worker

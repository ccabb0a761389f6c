#include "core/api/heartbeat.hpp"

#include "core/api/field_reader.hpp"

#include <algorithm>

namespace gpupool::api {

using nlohmann::json;

namespace {
// Warnings are the coordinator's own sentences; generous, so that a long one never fails a heartbeat.
constexpr std::size_t k_max_warning_bytes = 64 * 1024;
// Downloads reported per heartbeat; more are dropped (they only feed `status`).
constexpr std::size_t k_max_fetching = 1024;

// GPU indexes of the inventory (0..k_max_gpus-1), at most one entry per GPU it may have; errors name
// the entry (`unhealthy_gpus[2]`).
std::vector<std::int64_t> gpu_indexes(FieldReader& r, const char* key) {
    auto out = r.integers(key, 0);
    if (out.size() > k_max_gpus) {
        r.fail("at most " + std::to_string(k_max_gpus) + " GPU indexes", r.name(key));
        return {};
    }
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (out[i] >= static_cast<std::int64_t>(k_max_gpus)) {
            r.fail("expected a GPU index from 0 to " + std::to_string(k_max_gpus - 1) + ", got " +
                       std::to_string(out[i]),
                   r.name(key) + "[" + std::to_string(i) + "]");
            return {};
        }
    }
    return out;
}

} // namespace

std::vector<std::int64_t> gpus_without_new_work(const Heartbeat& h) {
    std::vector<std::int64_t> out = h.unhealthy_gpus;
    out.insert(out.end(), h.reclaimed_gpus.begin(), h.reclaimed_gpus.end());
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

Result<Heartbeat> heartbeat_from_json(const json& j) {
    if (!j.is_object()) {
        return make_error(ErrorCode::invalid_input, std::string("expected an object, got ") + j.type_name(), "body");
    }
    FieldReader r(j, "");
    Heartbeat h;
    h.running = read_ids<AttemptId>(r, "running");
    if (h.running.size() > k_max_running) {
        r.fail("at most " + std::to_string(k_max_running) + " attempts", "running");
    }
    h.unhealthy_gpus = gpu_indexes(r, "unhealthy_gpus");
    h.reclaimed_gpus = gpu_indexes(r, "reclaimed_gpus");
    h.draining = r.boolean("draining", false);
    const bool legacy_paused = r.boolean("paused", false); // from workers before `sharing`
    const auto state = r.optional_text("sharing", 64);
    h.sharing = legacy_paused ? SharingState::paused : SharingState::sharing;
    if (state) {
        if (auto s = sharing_state_from_string(*state)) {
            h.sharing = *s;
        } else {
            r.fail("expected sharing, paused, outside_window or reclaimed", "sharing");
        }
    }
    h.sharing_changes_at_ms = r.optional_integer("sharing_changes_at_ms", 0, k_max_integer);
    h.gpu_memory_used_mib = r.integers("gpu_memory_used_mib", 0);
    if (h.gpu_memory_used_mib.size() > k_max_gpus) {
        r.fail("at most " + std::to_string(k_max_gpus) + " entries, one per GPU", "gpu_memory_used_mib");
    }
    for (std::size_t i = 0; i < h.gpu_memory_used_mib.size() && !r.error(); ++i) {
        if (h.gpu_memory_used_mib[i] > k_max_gpu_memory_mib) {
            r.fail("expected at most " + std::to_string(k_max_gpu_memory_mib) + " MiB (16 TiB)",
                   "gpu_memory_used_mib[" + std::to_string(i) + "]");
        }
    }
    r.elements("fetching", false, [&](const json& e, const std::string& at) {
        FieldReader f(e, at);
        FetchProgress p;
        p.attempt = AttemptId(f.integer("attempt", 1, k_max_integer));
        p.done_bytes = f.integer("done_bytes", 0, k_max_integer, 0);
        p.total_bytes = f.integer("total_bytes", 0, k_max_integer, 0);
        if (f.error()) {
            r.fail(f.error()->message, f.error()->field);
        } else if (h.fetching.size() < k_max_fetching) {
            h.fetching.push_back(p);
        }
    });
    if (r.error()) {
        return *r.error();
    }
    if (auto it = j.find("terms"); it != j.end() && !it->is_null()) {
        auto terms = owner_terms_from_json(*it);
        if (!terms) {
            return terms.error();
        }
        h.terms = std::move(*terms);
    }
    if (auto it = j.find("inventory"); it != j.end() && !it->is_null()) {
        auto inventory = inventory_from_json(*it);
        if (!inventory) {
            return inventory.error();
        }
        h.inventory = std::move(*inventory);
    }
    return h;
}

json to_json(const Heartbeat& h) {
    json j{{"running", ids_json(h.running)},
           {"unhealthy_gpus", h.unhealthy_gpus},
           {"reclaimed_gpus", h.reclaimed_gpus},
           {"draining", h.draining},
           {"sharing", to_string(h.sharing)},
           {"paused", h.sharing != SharingState::sharing}, // what coordinators before `sharing` read
           {"sharing_changes_at_ms", or_null(h.sharing_changes_at_ms)}};
    if (!h.gpu_memory_used_mib.empty()) {
        j["gpu_memory_used_mib"] = h.gpu_memory_used_mib;
    }
    if (h.terms) {
        j["terms"] = to_json(*h.terms);
    }
    if (!h.fetching.empty()) {
        json f = json::array();
        for (const auto& p : h.fetching) {
            f.push_back({{"attempt", p.attempt.value()}, {"done_bytes", p.done_bytes}, {"total_bytes", p.total_bytes}});
        }
        j["fetching"] = f;
    }
    if (h.inventory) {
        j["inventory"] = to_json(*h.inventory);
    }
    return j;
}

Result<HeartbeatReply> heartbeat_reply_from_json(const json& j) {
    if (!j.is_object()) {
        return make_error(ErrorCode::invalid_input, std::string("expected an object, got ") + j.type_name(), "body");
    }
    FieldReader r(j, "");
    HeartbeatReply reply;
    reply.stop = read_ids<AttemptId>(r, "stop");
    reply.lease_ms = r.integer("lease_ms", 0, k_max_integer, 0);
    reply.warnings = r.texts("warnings", k_max_warning_bytes);
    r.elements("stop_reasons", false, [&](const json& e, const std::string& at) {
        FieldReader er(e, at);
        er.object();
        StopReason s;
        s.attempt = AttemptId(er.integer("attempt", 1, k_max_integer));
        s.reason = er.text("reason", k_max_warning_bytes);
        if (er.error()) {
            r.fail(er.error()->message, er.error()->field);
        } else {
            reply.stop_reasons.push_back(std::move(s));
        }
    });
    if (!r.error() && reply.stop_reasons.size() > reply.stop.size()) {
        r.fail("at most one per attempt of `stop`", "stop_reasons");
    }
    if (r.error()) {
        return *r.error();
    }
    return reply;
}

json to_json(const HeartbeatReply& reply) {
    json out{{"stop", ids_json(reply.stop)}, {"lease_ms", reply.lease_ms}, {"warnings", reply.warnings}};
    for (const auto& s : reply.stop_reasons) {
        out["stop_reasons"].push_back({{"attempt", s.attempt.value()}, {"reason", s.reason}});
    }
    return out;
}

} // namespace gpupool::api

#include "core/api/heartbeat.hpp"

#include "core/api/field_reader.hpp"

#include <algorithm>

namespace gpupool::api {

using nlohmann::json;

namespace {
// Warnings are the coordinator's own sentences; generous, so that a long one never fails a heartbeat.
constexpr std::size_t k_max_warning_bytes = 64 * 1024;
// More GPUs than any one machine has: the memory-in-use list is refused past it.
constexpr std::size_t k_max_gpus = 1024;
// Downloads reported per heartbeat; more are dropped (they only feed `status`).
constexpr std::size_t k_max_fetching = 1024;
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
    h.unhealthy_gpus = r.integers("unhealthy_gpus", 0);
    h.reclaimed_gpus = r.integers("reclaimed_gpus", 0);
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
        r.fail("more entries than a worker has GPUs", "gpu_memory_used_mib");
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
    if (r.error()) {
        return *r.error();
    }
    return reply;
}

json to_json(const HeartbeatReply& reply) {
    return {{"stop", ids_json(reply.stop)}, {"lease_ms", reply.lease_ms}, {"warnings", reply.warnings}};
}

} // namespace gpupool::api

#include "worker/owner/owner_requests.hpp"

#include "core/api/field_reader.hpp"
#include "core/resources/quantity.hpp"

#include <algorithm>

namespace gpupool::worker {

using nlohmann::json;

namespace {

json failed(const std::string& why) {
    return json{{"ok", false}, {"error", why}};
}
json failed(const Error& e) {
    return failed(e.field.empty() ? e.message : e.field + ": " + e.message);
}

json status_of(const OwnerPolicy& policy, const WorkerFacts& f) {
    json jobs = json::array();
    for (const auto& j : f.jobs) {
        jobs.push_back({{"attempt", j.attempt},
                        {"job", j.job},
                        {"name", j.name},
                        {"team", j.team},
                        {"image", j.image},
                        {"gpu_index", j.gpu_index},
                        {"gpu_milli", j.gpu_milli},
                        {"runtime_s", j.runtime_s},
                        {"stopping", j.stopping}});
    }
    json gpus = json::array();
    const auto offered = policy.offered_gpus(f.gpus);
    for (const auto& g : f.gpus) {
        const auto o =
            std::find_if(offered.begin(), offered.end(), [&](const GpuInfo& x) { return x.index == g.index; });
        gpus.push_back({{"index", g.index},
                        {"name", g.name},
                        {"memory_mib", g.memory_mib},
                        {"shared", o != offered.end()},
                        {"offered_mib", o != offered.end() ? o->memory_mib : 0},
                        {"memory_enforcement", f.enforcement}});
    }
    json pause;
    if (const auto& p = policy.pause_record(); p && policy.state() == api::SharingState::paused) {
        pause = {{"since_ms", p->since_ms}, {"why", p->why}, {"until_ms", api::or_null(p->until_ms)}};
    }
    return {{"ok", true},
            {"state", api::to_string(policy.state())},
            {"description", policy.describe()},
            {"changes_at_ms", api::or_null(policy.changes_at_ms())},
            {"window_open", policy.window().open},
            {"window_changes_at_ms", api::or_null(policy.window().changes_at_ms)},
            {"pause", pause},
            {"worker_id", f.worker_id},
            {"coordinator", f.coordinator},
            {"last_contact_ms", api::or_null(f.last_contact_ms)},
            {"draining", f.draining},
            {"gpus", gpus},
            {"jobs", jobs},
            {"offer", {{"cpu_milli", f.cpu_milli}, {"memory_mib", f.memory_mib}, {"max_jobs", f.slots}}},
            {"terms", api::to_json(policy.terms())}};
}

} // namespace

std::string job_label(const api::Assignment& a) {
    return "job " + std::to_string(a.job.value()) + " `" + a.spec.name + "` (team " +
           (a.team_name.empty() ? std::to_string(a.team.value()) : a.team_name) + ")";
}

std::string share_of(const api::Assignment& a) {
    std::string gpu = "no GPU";
    if (a.gpu_index >= 0) {
        gpu = (a.gpu_milli >= 1000 ? std::string("GPU ") : resources::format_milli(a.gpu_milli) + " of GPU ") +
              std::to_string(a.gpu_index);
    }
    return gpu + ", " + resources::format_milli(a.spec.resources.cpu_milli) + " CPU, " +
           resources::format_memory_mib(a.spec.resources.memory_mib) + " memory";
}

json answer_owner_request(OwnerPolicy& policy, const json& request, const WorkerFacts& facts, int running,
                          const std::function<void(const std::string&)>& stop_running_now) {
    api::FieldReader r(request, "");
    const std::string op = r.text("op", 32);
    if (r.error()) {
        return failed(*r.error());
    }
    if (op == "status") {
        policy.refresh(running, true);
        return status_of(policy, facts);
    }
    if (op == "pause") {
        const auto for_s = r.optional_integer("for_s", 1, resources::k_max_duration_s);
        const bool now = r.boolean("now", false);
        const std::string why = r.text("why", 200, std::string());
        if (r.error()) {
            return failed(*r.error());
        }
        std::optional<std::int64_t> until;
        if (for_s) {
            until = policy.now_ms() + *for_s * 1000;
        }
        if (auto st = policy.pause(why, until); !st) {
            return failed(st.error());
        }
        policy.refresh(running, true);
        if (now && running > 0) {
            stop_running_now("paused by the owner: handed back to the queue");
        }
        return {{"ok", true},
                {"state", api::to_string(policy.state())},
                {"description", policy.describe()},
                {"until_ms", api::or_null(until)},
                {"stopped", now ? running : 0}};
    }
    if (op == "resume") {
        if (auto st = policy.resume(); !st) {
            return failed(st.error());
        }
        policy.refresh(running, true);
        return {{"ok", true}, {"state", api::to_string(policy.state())}, {"description", policy.describe()}};
    }
    if (op == "reload") {
        if (auto st = policy.reload(); !st) {
            return failed(st.error().describe());
        }
        policy.refresh(running, true);
        return {{"ok", true}, {"state", api::to_string(policy.state())}, {"description", policy.describe()}};
    }
    return failed("op: expected status, pause, resume or reload, got `" + op + "`");
}

} // namespace gpupool::worker

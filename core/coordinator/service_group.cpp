// CoordinatorService: group commit. The tasks queued on the coordinator thread share one SQLite
// commit, and their answers wait for it (service_impl.hpp, "group commit"; store/group_commit.hpp).
#include "core/coordinator/service_impl.hpp"

#include <spdlog/spdlog.h>

namespace gpupool::coordinator::service_detail {

void ServiceState::join_group() {
    if (group == nullptr) {
        return;
    }
    if (!group_open) {
        if (auto st = group->begin_group(); !st) {
            // Each write then commits alone, as without groups: slower, never less durable.
            spdlog::warn("cannot group writes: {}", st.error().message);
            return;
        }
        group_open = true;
        group_tasks = 0;
        // Behind everything queued now: those tasks join this group, later ones the next.
        asio::post(ctx, [this] { end_group(); });
    }
    ++group_tasks;
}

void ServiceState::send(const net::Responder& respond, net::Response r) {
    if (group_open) {
        held.emplace_back(respond, std::move(r));
        return;
    }
    respond(std::move(r));
}

void ServiceState::end_group() {
    if (!group_open) {
        return;
    }
    // A pass its tasks asked for shares their commit: what a completion frees is placed, and the
    // parked poll answered, with one fsync instead of two.
    if (pass_posted) {
        pass_posted = false;
        run_pass();
    }
    group_open = false;
    const auto began = std::chrono::steady_clock::now();
    auto st = group->end_group();
    if (metrics) {
        metrics->group_committed(std::chrono::steady_clock::now() - began, group_tasks, static_cast<bool>(st));
    }
    auto answers = std::exchange(held, {});
    if (st) {
        for (auto& [respond, r] : answers) {
            respond(std::move(r));
        }
        return;
    }
    // Memory has taken writes that the database has not: none of them may be acknowledged, and the
    // pool is read back from what the database holds.
    spdlog::error("the database could not commit {} request(s) handled together: {}", group_tasks,
                  st.error().message);
    net::Response failed = error_response(make_error(
        ErrorCode::unavailable, "the coordinator could not store this request's changes; nothing was kept, retry"));
    failed.headers.set("Retry-After", "1");
    for (auto& [respond, r] : answers) {
        respond(failed);
    }
    // It stands by and reloads the pool at its next try for the lease (standby.retry; with SQLite the
    // lease is always its own), not at once: a disk that stays full then costs a reload a second,
    // not one per request, and the 503s meanwhile say why (standby_response).
    step_down("a group commit failed: " + st.error().message);
}

} // namespace gpupool::coordinator::service_detail

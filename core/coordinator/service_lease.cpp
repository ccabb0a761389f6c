// CoordinatorService: active and standby. The lease lives in the store (Store::acquire_lease, by the
// database's clock); this file keeps it — renewing it while active, trying to take it while standing
// by — and switches the service between the two on the coordinator thread.
#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/service_impl.hpp"

#include <spdlog/spdlog.h>

namespace gpupool::coordinator::service_detail {

namespace {

std::chrono::milliseconds renew_every(const ServiceOptions& o) {
    return std::max(o.standby.takeover_after / 3, std::chrono::milliseconds(50));
}

} // namespace

store::LeaseClaim ServiceState::claim() const {
    return {holder, options.standby.advertise, options.standby.takeover_after.count()};
}

Status ServiceState::become_active(std::string* first_admin_token) {
    auto fresh = std::make_unique<Coordinator>(*store, clock, options.coordinator);
    if (auto st = fresh->start(); !st) {
        return st;
    }
    spdlog::info("coordinator state loaded: {} jobs", fresh->job_book().jobs().size());
    if (!fresh->tokens().has_admin()) {
        if (first_admin_token == nullptr) {
            spdlog::warn("the pool has no admin token: make one with `gpupool coordinator --new-admin-token`");
        } else {
            auto tok = init_admin(*fresh);
            if (!tok) {
                return tok.error();
            }
            *first_admin_token = tok->secret;
        }
    }
    fresh->set_events(metrics.get());
    fresh->track_ended_jobs(true); // for POST /v1/jobs/wait
    coord = std::move(fresh);
    lease_renewed = std::chrono::steady_clock::now();
    {
        util::MutexLock lock(active_mutex);
        active_address = options.standby.advertise;
        stepped_down_because.clear();
    }
    serving = true;
    return {};
}

void ServiceState::step_down(const std::string& why) {
    if (!serving) {
        return;
    }
    spdlog::error("stepping down, no longer serving the pool: {}", why);
    serving = false;
    {
        // Its own address is no longer where the pool is served; the next read of the lease says
        // who serves (this one again, once it can write: a SQLite pool's only coordinator).
        util::MutexLock lock(active_mutex);
        active_address.clear();
        stepped_down_because = why;
    }
    tick_timer.cancel();
    for (auto& [w, list] : pollers) {
        for (auto& p : list) {
            p.timer->cancel();
            p.respond(standby_response());
        }
    }
    pollers.clear();
    release_job_waiters(true);
    coord.reset();
    arm_lease(); // at once: a standby from now on
}

void ServiceState::check_fenced() {
    if (serving && coord && coord->lost_lease()) {
        step_down("another coordinator holds the pool's lease: the database refused this one's write");
    }
}

void ServiceState::keep_lease() {
    if (stopped) {
        return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (serving) {
        auto st = store->renew_lease(options.standby.takeover_after.count());
        if (st) {
            lease_renewed = now;
        } else if (store::is_fenced(st.error())) {
            step_down(st.error().message);
            return;
        } else if (now - lease_renewed >= options.standby.takeover_after) {
            // A standby may hold it by now: serving on could only answer from a pool that moves on.
            step_down("the lease could not be renewed for " +
                      std::to_string(options.standby.takeover_after.count()) + " ms: " + st.error().message);
            return;
        } else {
            spdlog::warn("renewing the pool's lease failed (will retry): {}", st.error().message);
        }
        arm_lease();
        return;
    }
    auto lease = store->acquire_lease(claim());
    if (!lease) {
        spdlog::warn("standing by: cannot read the pool's lease: {}", lease.error().message);
    } else if (lease->holder == holder) {
        if (auto st = become_active(nullptr); !st) {
            spdlog::error("took the pool's lease but could not load the pool: {}", st.error().message);
            coord.reset();
            (void)store->release_lease();
        } else {
            spdlog::info("took over the pool (lease epoch {}); serving at {}", lease->epoch,
                         options.standby.advertise);
            arm_tick();
        }
    } else {
        util::MutexLock lock(active_mutex);
        if (active_address != lease->address) {
            spdlog::info("standing by; the active coordinator is {} (lease epoch {})", lease->address, lease->epoch);
        }
        active_address = lease->address;
        stepped_down_because.clear();
    }
    arm_lease();
}

void ServiceState::arm_lease() {
    lease_timer.expires_after(serving ? renew_every(options) : options.standby.retry);
    lease_timer.async_wait([this](boost::system::error_code ec) {
        if (!ec) {
            keep_lease();
        }
    });
}

net::Response ServiceState::standby_response() const {
    std::string active;
    std::string because;
    {
        util::MutexLock lock(active_mutex);
        active = active_address;
        because = stepped_down_because;
    }
    std::string detail;
    if (!active.empty()) {
        detail = "this coordinator is a standby; the pool is served by " + active;
    } else if (!because.empty()) {
        detail = "this coordinator stopped serving the pool (" + because +
                 ") and serves again once it holds the pool's lease; retry shortly";
    } else {
        detail = "this coordinator is a standby and no coordinator holds the pool's lease; retry shortly";
    }
    net::Response r = ok({{"error", "standby"}, {"detail", detail}, {"active", active}}, 503);
    r.headers.set("Retry-After", "1");
    if (!active.empty()) {
        r.headers.set("Gpupool-Active", active);
    }
    return r;
}

std::optional<net::Response> ServiceState::gate() const {
    if (serving) {
        return std::nullopt;
    }
    return standby_response();
}

void ServiceState::post_active(net::Responder respond, std::function<void(net::Responder)> fn) {
    asio::post(ctx, [this, respond = std::move(respond), fn = std::move(fn)]() mutable {
        if (!coord) {
            respond(standby_response());
            return;
        }
        join_group();
        // A write the database fenced is answered as a standby would: the client retries elsewhere.
        fn([this, respond = std::move(respond)](net::Response r) {
            send(respond, coord && coord->lost_lease() ? standby_response() : std::move(r));
        });
        check_fenced();
        after_task();
    });
}

} // namespace gpupool::coordinator::service_detail

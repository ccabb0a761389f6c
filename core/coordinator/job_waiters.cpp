// POST /v1/jobs/wait: a client parked until every job it named has ended, or its wait is over. It is
// answered from the jobs the coordinator reports as ended (Coordinator::take_ended_jobs), so a
// thousand clients waiting on a thousand jobs each cost nothing until one of those jobs ends.
#include "core/api/jobs.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/service_impl.hpp"

namespace gpupool::coordinator::service_detail {

using namespace gpupool::store;

namespace {

// The answer: each job's state, and whether they have all ended.
net::Response waiter_answer(const Coordinator& coord, const ServiceState::JobWaiter& w) {
    api::JobWaitReply reply;
    reply.done = true;
    for (JobId id : w.jobs) {
        auto j = coordinator::read_job(coord, w.who, id);
        if (!j) {
            continue; // gone from view (it was visible when the wait began): nothing to say of it
        }
        reply.done = reply.done && is_terminal(j->state);
        reply.jobs.push_back({id, to_string(j->state), j->exit_code});
    }
    return ok(api::to_json(reply));
}

// The body: {"jobs": [ids], "wait_ms": N}; each job must be one the caller may see.
void wait_for_jobs(ServiceState& svc, const net::Request& req, const Input& in, net::Responder respond) {
    auto who = svc.coord->authenticate(bearer(req));
    if (!who) {
        respond(error_response(who.error()));
        return;
    }
    auto request = api::job_wait_request_from_json(in.body);
    if (!request) {
        respond(error_response(request.error()));
        return;
    }
    auto& ids = request->jobs;
    if (ids.size() > k_max_jobs_per_submission) {
        respond(error_response(make_error(ErrorCode::invalid_input,
                                          "at most " + std::to_string(k_max_jobs_per_submission) + " jobs per wait",
                                          "jobs")));
        return;
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (auto j = coordinator::read_job(*svc.coord, *who, ids[i]); !j) {
            Error e = j.error();
            e.field = "jobs[" + std::to_string(i) + "]";
            respond(error_response(e));
            return;
        }
    }
    svc.park_job_waiter(std::move(respond), *who, std::move(ids), std::chrono::milliseconds(request->wait_ms));
}

} // namespace

void add_wait_route(ServiceState& s, net::Router& r) {
    // 10,000 ids of 19 digits are 200 KB.
    const Accepts accepts{k_max_json_body_bytes, {Role::member, Role::admin}, true, false, k_max_jobs_per_submission};
    r.add(
        "POST", "/v1/jobs/wait",
        [&s, accepts](net::Request req, net::Responder respond) {
            s.prepare_then(std::move(req), accepts, std::move(respond),
                           [&s](net::Request prepared, Input in, net::Responder respond_to) {
                               s.post_active(std::move(respond_to), [&s, req = std::move(prepared),
                                                                     in = std::move(in)](net::Responder answer) {
                                   wait_for_jobs(s, req, in, std::move(answer));
                               });
                           });
        },
        s.route_options(accepts));
}

void ServiceState::park_job_waiter(net::Responder respond, const Principal& who, std::vector<JobId> jobs,
                                   std::chrono::milliseconds wait) {
    JobWaiter w{std::move(respond), nullptr, who, std::move(jobs), 0};
    const std::uint64_t key = next_waiter++;
    for (JobId id : w.jobs) {
        auto j = coordinator::read_job(*coord, who, id);
        if (j && !is_terminal(j->state)) {
            waiters_by_job.emplace(id, key);
            ++w.open;
        }
    }
    if (w.open == 0 || wait.count() == 0 || stopped) {
        w.respond(waiter_answer(*coord, w));
        for (auto it = waiters_by_job.begin(); it != waiters_by_job.end();) {
            it = it->second == key ? waiters_by_job.erase(it) : std::next(it);
        }
        return;
    }
    w.timer = std::make_shared<asio::steady_timer>(ctx);
    w.timer->expires_after(std::min(wait, options.max_poll_wait));
    w.timer->async_wait([this, key](boost::system::error_code ec) {
        auto it = job_waiters.find(key);
        if (ec || it == job_waiters.end()) {
            return; // answered early
        }
        for (JobId id : it->second.jobs) {
            auto [first, last] = waiters_by_job.equal_range(id);
            for (auto b = first; b != last;) {
                b = b->second == key ? waiters_by_job.erase(b) : std::next(b);
            }
        }
        if (coord) {
            it->second.respond(waiter_answer(*coord, it->second));
        } else {
            it->second.respond(standby_response());
        }
        job_waiters.erase(it);
    });
    job_waiters.emplace(key, std::move(w));
}

void ServiceState::answer_job_waiters() {
    if (!coord) {
        return;
    }
    for (JobId id : coord->take_ended_jobs()) {
        auto [first, last] = waiters_by_job.equal_range(id);
        for (auto b = first; b != last;) {
            auto w = job_waiters.find(b->second);
            b = waiters_by_job.erase(b);
            if (w == job_waiters.end() || --w->second.open > 0) {
                continue;
            }
            w->second.timer->cancel();
            w->second.respond(waiter_answer(*coord, w->second));
            job_waiters.erase(w);
        }
    }
}

void ServiceState::release_job_waiters(bool standby) {
    for (auto& [key, w] : job_waiters) {
        w.timer->cancel();
        w.respond(standby || !coord ? standby_response() : waiter_answer(*coord, w));
    }
    job_waiters.clear();
    waiters_by_job.clear();
}

} // namespace gpupool::coordinator::service_detail

// CoordinatorService: its state, its coordinator thread, start and stop. The routes are registered
// by area in routes_*.cpp; requests and responses are read and written by service_json.cpp.
#include "core/coordinator/service.hpp"

#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/service_impl.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "core/store/open_store.hpp"
#include "core/util/sha256.hpp"
#include "core/util/token_secret.hpp"

#include <spdlog/spdlog.h>

#include <future>

namespace gpupool::coordinator {

namespace service_detail {

using store::Role;

std::optional<net::Response> ServiceState::admission(const std::string& token, const std::vector<Role>& roles) const {
    if (!coord) {
        return standby_response(); // it stepped down after the request's header came in
    }
    auto who = coord->authenticate(token);
    if (!who) {
        return error_response(who.error());
    }
    if (!roles.empty() && std::find(roles.begin(), roles.end(), who->role) == roles.end()) {
        return error_response(make_error(ErrorCode::forbidden, std::string("a ") + to_string(who->role) +
                                                                   " token cannot send this request"));
    }
    return std::nullopt;
}

net::RouteOptions ServiceState::route_options(const Accepts& accepts) {
    net::RouteOptions ro;
    ro.max_body_bytes = accepts.max_body;
    ro.body_to_file = accepts.to_file;
    ro.admit = [this, roles = accepts.roles](const net::Request& head, net::Decide decide) {
        asio::post(ctx, [this, roles, token = bearer(head), decide = std::move(decide)] {
            decide(admission(token, roles));
        });
    };
    return ro;
}

Result<Input> ServiceState::prepare(const net::Request& req, const Accepts& accepts) {
    Input in;
    if (accepts.json_body) {
        auto body = parse_json_object(req.body, k_max_json_depth, accepts.max_jobs);
        if (!body) {
            return body.error();
        }
        if (accepts.submission) {
            auto submission = api::submit_request_from_json(*body);
            if (!submission) {
                return submission.error();
            }
            in.submission = std::make_shared<api::SubmitRequest>(std::move(*submission));
        } else {
            in.body = std::move(*body);
        }
    }
    if (req.body_file) {
        in.file = UploadedFile{req.body_file->path(), static_cast<std::int64_t>(req.body_file->size()), {}};
        if (accepts.list_archive) {
            // One pass: the listing and the upload's SHA-256 together.
            util::Sha256 whole;
            // The small JSON files too, for spot checks that compare by value (spot_checks.hpp).
            archive::ListLimits limits;
            limits.json_file_bytes = archive::k_check_json_file_bytes;
            limits.json_total_bytes = archive::k_check_json_total_bytes;
            auto listing = archive::list_archive_file(req.body_file->path(), limits, &whole);
            if (!listing && listing.error().code == ErrorCode::io) {
                return listing.error();
            }
            in.file->sha256_hex = whole.hex();
            if (listing) {
                in.file->listing = std::move(*listing);
            } else {
                in.file->listing_error = listing.error().message;
            }
        } else {
            auto sha = util::sha256_file_hex(req.body_file->path());
            if (!sha) {
                return sha.error();
            }
            in.file->sha256_hex = std::move(*sha);
        }
    }
    return in;
}

void ServiceState::prepare_then(net::Request req, const Accepts& accepts, net::Responder respond, Prepared then) {
    const bool heavy = req.body_file != nullptr || (accepts.json_body && req.body.size() > k_inline_parse_bytes);
    auto run = [req = std::move(req), accepts, respond = std::move(respond), then = std::move(then)]() mutable {
        if (req.client && req.client->gone()) {
            return; // nobody to answer: not worth a parse
        }
        auto in = prepare(req, accepts);
        if (!in) {
            respond(error_response(in.error()));
            return;
        }
        if (accepts.json_body) {
            std::string().swap(req.body); // parsed: the text is not needed any more
        }
        then(std::move(req), std::move(*in), std::move(respond));
    };
    if (heavy && parse_pool) {
        asio::post(*parse_pool, std::move(run));
    } else {
        run();
    }
}

void ServiceState::on(net::Router& router, const std::string& method, const std::string& pattern, Handler handler,
                      Accepts accepts) {
    router.add(
        method, pattern,
        [this, handler = std::move(handler), accepts](net::Request req, net::Responder respond) {
            prepare_then(std::move(req), accepts, std::move(respond),
                         [this, handler](net::Request r, Input in, net::Responder respond_to) {
                             post_active(std::move(respond_to), [this, handler, r = std::move(r),
                                                                 in = std::move(in)](net::Responder answer) {
                                 auto who = coord->authenticate(bearer(r));
                                 if (!who) {
                                     answer(error_response(who.error()));
                                     return;
                                 }
                                 answer(handler(*this, r, in, *who));
                             });
                         });
        },
        route_options(accepts));
}

void ServiceState::schedule_soon() {
    if (pass_posted) {
        return;
    }
    pass_posted = true;
    asio::post(ctx, [this] {
        if (!pass_posted) {
            return; // an ending group ran it (end_group)
        }
        pass_posted = false;
        run_pass();
    });
}

namespace {

// After a pass (alone, or in a tick): the parked polls of the workers it gave work, the clients whose
// jobs ended, and a step down if the store fenced its write.
void answer_after_pass(ServiceState& s, const std::vector<WorkerId>& woken) {
    for (WorkerId w : woken) {
        s.answer_pollers(w);
    }
    s.answer_job_waiters();
    s.check_fenced();
}

} // namespace

void ServiceState::run_pass() {
    if (coord) {
        join_group();
        answer_after_pass(*this, coord->schedule_pass());
    }
}

void ServiceState::run_tick() {
    if (coord) {
        join_group();
        answer_after_pass(*this, coord->tick());
    }
}

void ServiceState::after_task() {
    if (!coord) {
        return;
    }
    answer_job_waiters();
    if (!coord->job_book().queued().empty() && coord->pass_due()) {
        schedule_soon();
    }
}

void ServiceState::answer_pollers(WorkerId w) {
    auto it = pollers.find(w);
    if (!coord || it == pollers.end() || it->second.empty()) {
        return;
    }
    Principal p{Role::worker, std::nullopt, w, TokenId{}};
    auto list = coordinator::assignments(*coord, p);
    if (!list || list->empty()) {
        return;
    }
    auto& parked = it->second;
    for (auto poller = parked.begin(); poller != parked.end();) {
        json arr = assignments_json(*list, poller->known);
        if (arr.empty()) {
            ++poller; // nothing it does not hold already: it waits on
            continue;
        }
        poller->timer->cancel();
        poller->respond(ok({{"assignments", std::move(arr)}}));
        poller = parked.erase(poller);
    }
}

void ServiceState::arm_tick() {
    tick_timer.expires_after(options.tick);
    tick_timer.async_wait([this](boost::system::error_code ec) {
        if (ec || stopped || !serving) {
            return;
        }
        run_tick();
        arm_tick();
    });
}

net::Router ServiceState::routes() {
    net::Router r;
    net::RouteOptions no_body; // nothing to read before a token is checked
    no_body.max_body_bytes = 0;
    r.add("GET", "/v1/health", [](net::Request, net::Responder respond) { respond(ok({{"status", "ok"}})); }, no_body);
    add_admin_routes(*this, r);
    add_job_routes(*this, r);
    add_worker_routes(*this, r);
    add_credit_routes(*this, r);
    add_metrics_routes(*this, r);
    add_dashboard_routes(*this, r);
    add_dist_routes(*this, r);
    return r;
}

} // namespace service_detail

namespace asio = boost::asio;
using service_detail::json;
using service_detail::ok;

const util::Clock& system_clock() {
    static const util::SystemClock clock;
    return clock;
}

CoordinatorService::CoordinatorService(ServiceOptions options, std::unique_ptr<store::Store> store,
                                       const util::Clock& clock)
    : m_impl(std::make_unique<service_detail::ServiceState>(std::move(options), std::move(store), clock)) {}

CoordinatorService::~CoordinatorService() { stop(); }

Result<IssuedToken> recover_admin_token(const std::string& db_spec, const std::string& password) {
    store::OpenOptions oo;
    oo.create = false;
    oo.password = password;
    auto opened = store::open_store(db_spec, oo);
    if (!opened) {
        Error e = opened.error();
        if (e.code == ErrorCode::not_found && e.field.empty()) {
            e.field = "--db";
        }
        return e;
    }
    Coordinator coord(**opened, system_clock());
    if (auto st = coord.start(); !st) {
        return st.error();
    }
    return recover_admin(coord);
}

Status CoordinatorService::start(std::string* first_admin_token) {
    service_detail::ServiceState& s = *m_impl;
    if (!s.store) {
        return make_error(ErrorCode::internal, "the coordinator service was stopped; make a new one");
    }
    auto holder = util::new_token_secret();
    if (!holder) {
        return holder.error();
    }
    s.holder = holder->substr(4, 16); // a random name for this process on the lease
    s.metrics = std::make_unique<PrometheusMetrics>();
    // The servers first (answering as a standby until the pool is loaded), so that the lease can
    // carry the port they were given.
    const auto observe = [m = s.metrics.get()](const net::Exchange& e) { m->observe(e); };
    const auto gate = [&s](std::string_view, std::string_view) { return s.gate(); };
    net::ServerOptions http = s.options.http;
    http.observe = observe;
    http.gate = gate;
    s.server = std::make_unique<net::HttpServer>(http, s.routes());
    if (s.options.metrics_listener) {
        net::ServerOptions mo = *s.options.metrics_listener;
        mo.observe = observe;
        mo.gate = gate;
        s.metrics_server = std::make_unique<net::HttpServer>(mo, service_detail::metrics_listener_routes(s));
    }
    s.group = dynamic_cast<store::GroupCommit*>(s.store.get());
    s.parse_pool.emplace(1);
    s.guard.emplace(s.ctx.get_executor());
    s.thread = std::thread([&s] { s.ctx.run(); });
    for (auto* server : {s.server.get(), s.metrics_server.get()}) {
        if (server == nullptr) {
            continue;
        }
        if (auto st = server->start(); !st) {
            stop();
            return st;
        }
    }
    if (s.options.standby.advertise.empty()) {
        const std::string scheme = s.options.http.tls_cert_file.empty() ? "http" : "https";
        const std::string& host = s.options.http.host;
        s.options.standby.advertise = scheme + "://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
                                      ":" + std::to_string(s.server->port());
    }
    // Take the pool (or stand by) on the coordinator thread, which owns it from then on.
    std::promise<Status> taken;
    asio::post(s.ctx, [&s, &taken, first_admin_token] {
        auto lease = s.store->acquire_lease(s.claim());
        if (!lease) {
            taken.set_value(lease.error());
            return;
        }
        if (lease->holder == s.holder) {
            if (auto st = s.become_active(first_admin_token); !st) {
                s.coord.reset();
                (void)s.store->release_lease();
                taken.set_value(st);
                return;
            }
            s.arm_tick();
        } else {
            util::MutexLock lock(s.active_mutex);
            s.active_address = lease->address;
            spdlog::info("standing by: the pool is served by {} (lease epoch {})", lease->address, lease->epoch);
        }
        s.arm_lease();
        taken.set_value(Status{});
    });
    if (auto st = taken.get_future().get(); !st) {
        stop();
        return st;
    }
    return {};
}

bool CoordinatorService::active() const { return m_impl->serving; }

std::string CoordinatorService::active_address() const {
    util::MutexLock lock(m_impl->active_mutex);
    return m_impl->active_address;
}

void CoordinatorService::stop() {
    service_detail::ServiceState& s = *m_impl;
    if (!s.thread.joinable()) {
        return;
    }
    // Answer parked polls on the coordinator thread, then let the server finish in-flight work.
    std::promise<void> done;
    asio::post(s.ctx, [&s, &done] {
        s.stopped = true;
        s.tick_timer.cancel();
        s.lease_timer.cancel();
        for (auto& [w, list] : s.pollers) {
            for (auto& p : list) {
                p.timer->cancel();
                p.respond(ok({{"assignments", json::array()}}));
            }
        }
        s.pollers.clear();
        s.release_job_waiters(false);
        done.set_value();
    });
    done.get_future().wait();
    if (s.metrics_server) {
        s.metrics_server->stop();
    }
    if (s.server) {
        s.server->stop();
    }
    if (s.parse_pool) {
        s.parse_pool->join(); // what it still parses goes to the coordinator thread, which runs on
    }
    s.guard.reset();
    s.thread.join();
    if (s.backup_thread.joinable()) {
        s.backup_thread.join(); // a backup in progress finishes before its store closes
    }
    if (s.serving) {
        s.serving = false;
        (void)s.store->release_lease(); // a standby takes over at once rather than after the lease runs out
    }
    s.coord.reset();
    s.store.reset(); // nothing more is written: another process may take the database now
}

Status CoordinatorService::reload_tls() {
    if (!m_impl->server) {
        return make_error(ErrorCode::conflict, "the coordinator is not serving");
    }
    return m_impl->server->reload_tls();
}

std::uint16_t CoordinatorService::port() const { return m_impl->server ? m_impl->server->port() : 0; }

std::uint16_t CoordinatorService::metrics_port() const {
    return m_impl->metrics_server ? m_impl->metrics_server->port() : 0;
}

std::vector<net::RouteInfo> CoordinatorService::routes() const {
    return m_impl->server ? m_impl->server->router().routes() : std::vector<net::RouteInfo>{};
}

} // namespace gpupool::coordinator

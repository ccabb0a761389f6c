// CoordinatorService's insides, shared by service.cpp (the state, its thread, start and stop), the
// request and response helpers (service_json.cpp) and the routes_*.cpp files, one per area of the
// API, that register the routes. Not part of the service's interface: include it only from those.
//
// Rules every route follows (ServiceState::on): who may send a body is checked from the headers
// before a byte of it is read; what the body may be (size, JSON depth, number of jobs, a file) is
// checked where it is parsed: on the io thread that read it when it is small, on the parse thread
// when it is large (so that no request waits on an io thread behind another's parse); the handler
// then runs on the coordinator thread with the caller's Principal and returns the whole response.
// Handlers are plain functions of the state, so each is small and named after what it does.
#pragma once

#include "core/api/field_reader.hpp"
#include "core/api/submit.hpp"
#include "core/coordinator/prometheus_metrics.hpp"
#include "core/coordinator/service.hpp"
#include "core/store/group_commit.hpp"
#include "core/util/thread_safety.hpp"

#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpupool::coordinator::service_detail {

namespace asio = boost::asio;
using json = nlohmann::json;

inline constexpr std::size_t k_max_json_body_bytes = std::size_t{1} << 20; // most routes: a small JSON object
// Submissions and estimates: a sweep of 10,000 jobs (k_max_jobs_per_submission) with room to spare.
// 10,000 realistic jobs (bench/body_bench.cpp: tlens-attribution swept, with an environment, outputs,
// a model cache and an inputs archive) are 8.8 MiB, 923 bytes a job: this is 1.8 times that.
inline constexpr std::size_t k_max_submit_bytes = std::size_t{16} << 20;
// Bodies larger than this are parsed on the parse thread rather than on the io thread that read them.
inline constexpr std::size_t k_inline_parse_bytes = std::size_t{64} << 10;

// What a route accepts, checked before its handler runs on the coordinator thread.
struct Accepts {
    std::size_t max_body = k_max_json_body_bytes;
    std::vector<store::Role> roles{}; // who may send a body here, checked from the headers; empty: any valid token
    bool json_body = true;            // a JSON object, parsed within size and depth limits
    bool to_file = false;             // spooled to disk by the server, its SHA-256 measured on the parse thread
    std::size_t max_jobs = 0;         // items of the body's "jobs" array, counted before it is built; 0: any
    bool submission = false;          // the body is a submission (api::SubmitRequest), read where it is parsed
    bool list_archive = false; // a body spooled to disk is a tar archive, listed there too (UploadedFile::listing)
};
// Routes that read nothing from their body (it is ignored, within the default size).
inline const Accepts k_no_json_body{k_max_json_body_bytes, {}, false, false};
// Submissions and estimates: members and admins, at most a sweep's jobs, read off the coordinator thread.
inline const Accepts k_submission{
    k_max_submit_bytes, {store::Role::member, store::Role::admin}, true, false, k_max_jobs_per_submission, true};

// What a handler gets besides the request: the body as checked where it was parsed.
struct Input {
    json body = json::object();         // routes with a JSON body (but submissions)
    std::optional<UploadedFile> file{}; // routes whose body is spooled to disk
    // Accepts::submission; handed over whole: the handler may move from it.
    std::shared_ptr<api::SubmitRequest> submission{};
};

struct ServiceState;
using Handler = std::function<net::Response(ServiceState&, const net::Request&, const Input&, const Principal&)>;

// Everything the service holds while it runs. Its fields other than the io context are touched
// only on the coordinator thread once start() has launched it.
struct ServiceState {
    ServiceState(ServiceOptions o, std::unique_ptr<store::Store> s, const util::Clock& c)
        : options(std::move(o)), clock(c), store(std::move(s)) {}

    ServiceOptions options;
    const util::Clock& clock;
    std::unique_ptr<store::Store> store; // closed by stop(): another process may take it then
    std::unique_ptr<Coordinator> coord;
    // Outlives both servers (their io threads observe every exchange) and the coordinator's events.
    std::unique_ptr<PrometheusMetrics> metrics;
    std::unique_ptr<net::HttpServer> server;
    std::unique_ptr<net::HttpServer> metrics_server; // ServiceOptions::metrics_listener
    asio::io_context ctx;
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
    std::thread thread;
    // Parses large bodies (k_inline_parse_bytes) and checksums uploads, one at a time, off the io
    // threads; what waits for it holds its body's share of the server's max_body_memory, so the
    // queue is bounded by that. Made by start(), joined by stop() once the server has stopped.
    std::optional<asio::thread_pool> parse_pool;
    asio::steady_timer tick_timer{ctx};
    bool stopped = false;

    // Long polls parked until work is placed on their worker or their wait ends.
    struct Poller {
        net::Responder respond;
        std::shared_ptr<asio::steady_timer> timer;
        std::set<AttemptId> known{}; // assignments the worker holds already: not an answer
    };
    std::map<WorkerId, std::vector<Poller>> pollers;
    bool pass_posted = false; // a scheduling pass waits on the coordinator thread (schedule_soon)

    // Clients parked on POST /v1/jobs/wait until every job they named has ended or their wait ends
    // (job_waiters.cpp). Answered from the jobs the coordinator says ended, never by polling them.
    struct JobWaiter {
        net::Responder respond;
        std::shared_ptr<asio::steady_timer> timer;
        Principal who;
        std::vector<JobId> jobs;
        std::size_t open = 0; // of `jobs`, those not ended yet
    };
    std::map<std::uint64_t, JobWaiter> job_waiters;
    std::multimap<JobId, std::uint64_t> waiters_by_job; // the open jobs of each waiter
    std::uint64_t next_waiter = 1;

    // `admin backup`: one at a time, on a thread of its own (the store's backup() may run beside
    // the coordinator thread); joined before the store closes.
    bool backup_running = false;
    std::thread backup_thread;

    // ---- group commit (service_group.cpp) --------------------------------------------------------
    // With a store that groups its writes (store::GroupCommit: SQLite), the tasks queued on the
    // coordinator thread share one commit. The first task opens a group and posts its end behind
    // whatever is queued then; every answer given while it is open (the tasks', parked polls' and
    // waiters') is held until that end has committed, and is a 503 if it could not: nothing is
    // acknowledged before it is durable. Under load, what arrives during one commit shares the next.
    store::GroupCommit* group = nullptr; // the store's, or null: every write commits alone
    bool group_open = false;
    std::vector<std::pair<net::Responder, net::Response>> held; // answers waiting for the group's end
    std::size_t group_tasks = 0;                                 // tasks that joined the open group
    // At the start of every task on the coordinator thread that may write.
    void join_group();
    // Commits the open group, then sends what it held; a failed commit answers them 503 and reloads
    // the pool from the database (memory may hold what the store lost).
    void end_group();
    // Every answer on the coordinator thread goes out through here.
    void send(const net::Responder& respond, net::Response r);

    // ---- active and standby (service_lease.cpp) ------------------------------------------------
    // On a shared store (PostgreSQL) several coordinators run and one holds the pool's lease: it has
    // loaded the pool (`coord`) and serves. The others stand by with no `coord`, answer every request
    // 503 with the active one's address, and try to take the lease. A store only one process opens
    // (SQLite) is always this one's.
    std::string holder;               // this process's name on the lease (random, fixed at start)
    std::atomic<bool> serving{false}; // holds the lease and has loaded the pool; read by io threads
    mutable util::Mutex active_mutex;
    std::string active_address GUARDED_BY(active_mutex); // where clients go while this one stands by
    // Why this one stopped serving, until it serves again or learns who does (the 503 says it: it
    // must not name itself, whose lease it gave up, as the one that serves).
    std::string stepped_down_because GUARDED_BY(active_mutex);
    asio::steady_timer lease_timer{ctx};
    std::chrono::steady_clock::time_point lease_renewed{};

    store::LeaseClaim claim() const;
    // Takes the pool: loads it into a new Coordinator and starts serving (the coordinator thread, or
    // start() before it runs). A new pool's first admin token goes to `first_admin_token`.
    Status become_active(std::string* first_admin_token);
    // Lets the pool go (the lease was lost or could not be renewed): parked polls are answered as a
    // standby would, the Coordinator is dropped, and this one watches the lease again.
    void step_down(const std::string& why);
    void arm_lease();
    void keep_lease(); // one turn: renew when active, try to take the lease when standing by
    net::Response standby_response() const;
    // ServerOptions::gate: a standby answers everything itself.
    std::optional<net::Response> gate() const;
    // Runs `fn` on the coordinator thread while this one is active; else answers as a standby. After
    // `fn`, a write that the database fenced makes this one step down.
    void post_active(net::Responder respond, std::function<void(net::Responder)> fn);
    // After a request or a tick: step down when the store refused a write as fenced.
    void check_fenced();

    // Admission from the headers alone, on the coordinator thread: nobody reaches a body without a
    // valid token of a role the route takes.
    std::optional<net::Response> admission(const std::string& token, const std::vector<store::Role>& roles) const;
    net::RouteOptions route_options(const Accepts& accepts);
    // The body's checks that need no pool state, on the thread that parses it.
    static Result<Input> prepare(const net::Request& req, const Accepts& accepts);
    using Prepared = std::function<void(net::Request, Input, net::Responder)>;
    // prepare(), on this io thread for a small JSON body, else on the parse thread; then `then`
    // there, or the error answered.
    void prepare_then(net::Request req, const Accepts& accepts, net::Responder respond, Prepared then);
    // A route whose handler runs on the coordinator thread after authentication.
    void on(net::Router& router, const std::string& method, const std::string& pattern, Handler handler,
            Accepts accepts = {});

    // A scheduling pass at once, after what is queued on the coordinator thread now (or at the end
    // of the open group, whichever comes first): one pending at most, however many events asked for
    // it. It runs only when pass_due().
    void schedule_soon();
    void run_pass();
    void run_tick();
    // After every task on the coordinator thread: a pass when what it changed may let work fit, and
    // the answers of clients whose jobs ended.
    void after_task();
    void answer_pollers(WorkerId w);
    void arm_tick();
    // Job waiters (job_waiters.cpp): parks one (answered at once when its jobs have all ended).
    void park_job_waiter(net::Responder respond, const Principal& who, std::vector<JobId> jobs,
                         std::chrono::milliseconds wait);
    void answer_job_waiters();
    // Answers every waiter now (the service stops, or stands by: `standby`).
    void release_job_waiters(bool standby);

    // Every route of the API, from the area functions below.
    net::Router routes();
    // The metrics now, rendered on the coordinator thread.
    net::Response metrics_response() const;
};

// ---- the routes, one function per area (docs/api.md) -------------------------------------------

// Teams, tokens, whoami, and the fleet as admins see it (list, drain, activate, ban).
void add_admin_routes(ServiceState& s, net::Router& r);
// Submissions, jobs and sweeps, their logs and outputs, and input archives.
void add_job_routes(ServiceState& s, net::Router& r);
// POST /v1/jobs/wait: parked until the jobs named have ended (job_waiters.cpp).
void add_wait_route(ServiceState& s, net::Router& r);
// The workers' protocol: register, heartbeat, the long poll, and their attempts.
void add_worker_routes(ServiceState& s, net::Router& r);
// Grants, adjustments, budgets, balances, the report and estimates.
void add_credit_routes(ServiceState& s, net::Router& r);
// GET /metrics for admin tokens and the scrape token (routes_metrics.cpp).
void add_metrics_routes(ServiceState& s, net::Router& r);
// The metrics listener's one route: GET /metrics without a token.
net::Router metrics_listener_routes(ServiceState& s);
// The read-only web dashboard: its page and files (no token: they hold no data), and the pool's
// utilisation samples it charts (GET /v1/pool/samples, members and admins).
void add_dashboard_routes(ServiceState& s, net::Router& r);
// The files for GPU owners (no token: routes_dist.cpp, dist.hpp): GET /dist/{name}, /dist/SHA256SUMS,
// /dist/install.sh and their description, GET /v1/dist.
void add_dist_routes(ServiceState& s, net::Router& r);

// ---- requests and responses (service_json.cpp) --------------------------------------------------

net::Response error_response(const Error& e);
// A poll's answer: the assignments the worker does not hold already (`known`).
json assignments_json(const std::vector<Assignment>& list, const std::set<AttemptId>& known);
net::Response ok(const json& body, int status = 200);
// An archive (outputs, inputs) as raw bytes, or the error.
net::Response bytes_response(Result<std::string> data);
// The token of an `Authorization: Bearer` header (empty when there is none).
std::string bearer(const net::Request& req);

Result<std::int64_t> parse_int(const std::string& text, const std::string& field);
// An optional query parameter that must be a positive integer when given.
Result<std::optional<std::int64_t>> positive_query(const net::Request& req, const char* name);
json opt_json(const std::optional<std::int64_t>& v);

} // namespace gpupool::coordinator::service_detail

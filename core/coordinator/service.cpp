#include "core/coordinator/service.hpp"

#include "core/coordinator/auth.hpp"
#include "core/recipe/recipe_json.hpp"
#include "core/util/files.hpp"
#include "core/util/strings.hpp"
#include "core/store/sqlite_store.hpp"

#include <boost/asio.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <type_traits>
#include <future>
#include <thread>

namespace gpupool::coordinator {

namespace asio = boost::asio;
using json = nlohmann::json;
using namespace gpupool::store;

namespace {
constexpr std::size_t k_max_json_body_bytes = std::size_t{1} << 20;   // most routes: a small JSON object
constexpr std::size_t k_max_submit_bytes = std::size_t{64} << 20;     // a sweep of 10,000 jobs fits
constexpr std::size_t k_max_string_field_bytes = 4096;                // names, notes, labels

// What a route accepts, checked before its handler runs on the coordinator thread.
struct Accepts {
    std::size_t max_body = k_max_json_body_bytes;
    std::vector<Role> roles; // who may send a body here, checked from the headers; empty: any valid token
    bool json_body = true;   // a JSON object, parsed on an io thread within size and depth limits
    bool to_file = false;    // spooled to disk by the server, its SHA-256 measured on an io thread
};
// Routes that read nothing from their body (it is ignored, within the default size).
const Accepts k_no_json_body{k_max_json_body_bytes, {}, false, false};
} // namespace

int http_status(ErrorCode code) { return net::http_status_for(code); }

namespace {

net::Response error_response(const Error& e) {
    if (http_status(e.code) >= 500) {
        spdlog::error("{}", util::escape_control(e.message)); // the operators' business, not the caller's only
    }
    return net::json_error(http_status(e.code), to_string(e.code), e.message, e.field);
}

net::Response ok(const json& body, int status = 200) { return net::json_response(status, body.dump()); }

// An archive (outputs, inputs) as raw bytes, or the error.
net::Response bytes_response(Result<std::string> data) {
    if (!data) {
        return error_response(data.error());
    }
    net::Response resp;
    resp.content_type = "application/octet-stream";
    resp.body = std::move(*data);
    return resp;
}

std::string bearer(const net::Request& req) {
    std::string h = req.header("Authorization");
    constexpr std::string_view k_prefix = "Bearer ";
    if (h.size() > k_prefix.size() && net::iequals(std::string_view(h).substr(0, k_prefix.size()), k_prefix)) {
        return h.substr(k_prefix.size());
    }
    return {};
}

// Counts nesting and stops at the first level too deep, before anything is built: 8 MiB of `[`
// costs a scan, not a tree of millions of arrays.
class DepthCheck : public nlohmann::json_sax<json> {
public:
    explicit DepthCheck(std::size_t max_depth) : m_max(max_depth) {}
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return ++m_depth <= m_max; }
    bool key(string_t&) override { return true; }
    bool end_object() override { return --m_depth, true; }
    bool start_array(std::size_t) override { return ++m_depth <= m_max; }
    bool end_array() override { return --m_depth, true; }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
        m_syntax_error = true;
        return false;
    }
    bool too_deep() const { return m_depth > m_max; }
    bool syntax_error() const { return m_syntax_error; }

private:
    std::size_t m_max;
    std::size_t m_depth = 0;
    bool m_syntax_error = false;
};

} // namespace

Result<json> parse_json_object(std::string_view text, std::size_t max_depth) {
    if (text.empty()) {
        return Result<json>(boost::system::in_place_value, json::object());
    }
    DepthCheck depth(max_depth);
    if (!json::sax_parse(text, &depth)) {
        if (depth.too_deep()) {
            return make_error(ErrorCode::invalid_input,
                              "the request body nests deeper than " + std::to_string(max_depth) + " levels", "body");
        }
        return make_error(ErrorCode::invalid_input, "the request body is not valid JSON", "body");
    }
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) {
        return make_error(ErrorCode::invalid_input, "the request body is not valid JSON", "body");
    }
    if (!j.is_object()) {
        return make_error(ErrorCode::invalid_input, "the request body must be a JSON object", "body");
    }
    return Result<json>(boost::system::in_place_value, std::move(j));
}

namespace {

Result<std::int64_t> parse_int(const std::string& text, const std::string& field) {
    std::int64_t v = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
        return make_error(ErrorCode::invalid_input, "expected an integer, got `" + text + "`", field);
    }
    return v;
}

// An optional query parameter that must be a positive integer when given.
Result<std::optional<std::int64_t>> positive_query(const net::Request& req, const char* name) {
    const std::string s = req.query_value(name);
    if (s.empty()) {
        return std::optional<std::int64_t>{};
    }
    auto v = parse_int(s, name);
    if (!v || *v <= 0) {
        return make_error(ErrorCode::invalid_input, "expected a positive integer, got `" + s + "`", name);
    }
    return std::optional<std::int64_t>{*v};
}

template <class T>
Result<T> field(const json& j, const char* name, std::optional<T> fallback = std::nullopt) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) {
        if (fallback) {
            return *fallback;
        }
        return make_error(ErrorCode::invalid_input, "missing required field", name);
    }
    // No silent conversions: 1.9 is not an integer (nlohmann would truncate it to 1).
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        if (!it->is_number_integer()) {
            return make_error(ErrorCode::invalid_input, std::string("expected an integer, got ") + it->type_name(), name);
        }
    } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
        if (!it->is_array() || !std::all_of(it->begin(), it->end(), [](const json& v) { return v.is_number_integer(); })) {
            return make_error(ErrorCode::invalid_input, "expected an array of integers", name);
        }
    } else if constexpr (std::is_same_v<T, std::string>) {
        if (it->is_string() && it->get_ref<const std::string&>().size() > k_max_string_field_bytes) {
            return make_error(ErrorCode::invalid_input,
                              "longer than " + std::to_string(k_max_string_field_bytes) + " bytes", name);
        }
    }
    try {
        return it->get<T>();
    } catch (const json::exception&) {
        return make_error(ErrorCode::invalid_input, std::string("wrong type: got ") + it->type_name(), name);
    }
}

json entry_json(const credits::Entry& e) {
    json j = {{"id", e.id},
              {"at", e.at_ms},
              {"debit", credits::to_string(e.debit)},
              {"credit", credits::to_string(e.credit)},
              {"amount_micro", e.amount},
              {"reason", credits::to_string(e.reason)},
              {"note", e.note}};
    j["attempt"] = e.attempt != 0 ? json(e.attempt) : json();
    j["grant"] = e.grant != 0 ? json(e.grant) : json();
    j["payer_team"] = e.payer != 0 ? json(e.payer) : json();
    return j;
}

json opt_json(const std::optional<std::int64_t>& v) { return v ? json(*v) : json(); }

// An optional integer field: absent or null -> nullopt.
Result<std::optional<std::int64_t>> opt_field(const json& j, const char* name) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) {
        return std::optional<std::int64_t>();
    }
    if (!it->is_number_integer()) {
        return make_error(ErrorCode::invalid_input, std::string("wrong type: got ") + it->type_name(), name);
    }
    return std::optional<std::int64_t>(it->get<std::int64_t>());
}

json member_budget_json(const MemberBudget& m) {
    return {{"token_id", m.token_id},           {"label", m.label},
            {"day_micro", opt_json(m.day_micro)}, {"week_micro", opt_json(m.week_micro)},
            {"spent_day_micro", m.spent_day_micro}, {"spent_week_micro", m.spent_week_micro},
            {"held_micro", m.held_micro}};
}

Result<std::vector<recipe::JobSpec>> jobs_field(const json& body) {
    auto jobs_it = body.find("jobs");
    if (jobs_it == body.end() || !jobs_it->is_array()) {
        return make_error(ErrorCode::invalid_input, "expected an array of jobs", "jobs");
    }
    std::vector<recipe::JobSpec> out;
    for (std::size_t i = 0; i < jobs_it->size(); ++i) {
        auto spec = recipe::job_from_json((*jobs_it)[i]);
        if (!spec) {
            Error e = spec.error();
            e.field = "jobs[" + std::to_string(i) + "]." + e.field;
            return e;
        }
        out.push_back(std::move(*spec));
    }
    return out;
}

json job_json(const Coordinator& coord, const JobRecord& j, const std::vector<AttemptRecord>& attempts,
              const std::string& waiting) {
    json a = json::array();
    std::int64_t cost = 0;
    for (const auto& at : attempts) {
        const std::int64_t c = coord.cost_micro(at);
        cost += c;
        a.push_back({{"id", at.id.value()},
                     {"worker", at.worker.value()},
                     {"gpu_index", at.gpu_index},
                     {"gpu_milli", at.gpu_milli},
                     {"state", to_string(at.state)},
                     {"assigned_at", at.assigned_at},
                     {"started_at", at.started_at ? json(*at.started_at) : json()},
                     {"ended_at", at.ended_at ? json(*at.ended_at) : json()},
                     {"exit_code", at.exit_code ? json(*at.exit_code) : json()},
                     {"reason", at.reason},
                     {"price_micro_per_hour", at.price_micro_per_hour},
                     {"cost_micro", c},
                     {"voided_at", at.voided_at ? json(*at.voided_at) : json()}});
    }
    return {{"id", j.id.value()},
            {"sweep_id", j.sweep_id},
            {"team", j.team.value()},
            {"submitted_by", coord.submitter_of(j.id)},
            {"name", j.spec.name},
            {"state", to_string(j.state)},
            {"attempts", j.attempts},
            {"created_at", j.created_at},
            {"updated_at", j.updated_at},
            {"finished_at", j.finished_at ? json(*j.finished_at) : json()},
            {"exit_code", j.exit_code ? json(*j.exit_code) : json()},
            {"reason", j.reason},
            {"waiting_reason", waiting},
            {"spec", json::parse(recipe::to_json(j.spec).dump())},
            {"cost_micro", cost},
            {"held_micro", coord.held_micro(j.id)},
            {"attempt_history", a}};
}

json assignment_json(const Assignment& a) {
    return {{"attempt", a.attempt.value()}, {"job", a.job.value()},         {"attempt_number", a.attempt_number},
            {"gpu_index", a.gpu_index},     {"gpu_milli", a.gpu_milli}, {"team", a.team.value()}, {"team_name", a.team_name},
            {"spec", json::parse(recipe::to_json(a.spec).dump())}};
}

} // namespace

struct CoordinatorService::Impl {
    ServiceOptions options;
    std::optional<util::FileLock> db_lock; // one coordinator per database
    SystemClock clock;
    std::unique_ptr<SqliteStore> store;
    std::unique_ptr<Coordinator> coord;
    std::unique_ptr<net::HttpServer> server;
    asio::io_context ctx;
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
    std::thread thread;
    asio::steady_timer tick_timer{ctx};
    bool stopped = false;

    struct Poller {
        net::Responder respond;
        std::shared_ptr<asio::steady_timer> timer;
    };
    std::map<WorkerId, std::vector<Poller>> pollers;

    // What a handler gets besides the request: the body as checked on an io thread.
    struct Input {
        json body = json::object();        // routes with a JSON body
        std::optional<UploadedFile> file;  // routes whose body is spooled to disk
    };
    using Fn = std::function<net::Response(const net::Request&, const Input&, const Principal&)>;


    // Admission from the headers alone, on the coordinator thread: nobody reaches a body without a
    // valid token of a role the route takes.
    std::optional<net::Response> admission(const std::string& token, const std::vector<Role>& roles) const {
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

    net::RouteOptions route_options(const Accepts& accepts) {
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

    // The body's checks that need no pool state, on the io thread that read it.
    static Result<Input> prepare(const net::Request& req, const Accepts& accepts) {
        Input in;
        if (accepts.json_body) {
            auto body = parse_json_object(req.body, k_max_json_depth);
            if (!body) {
                return body.error();
            }
            in.body = std::move(*body);
        }
        if (req.body_file) {
            auto sha = sha256_file_hex(req.body_file->path());
            if (!sha) {
                return sha.error();
            }
            in.file = UploadedFile{req.body_file->path(), static_cast<std::int64_t>(req.body_file->size()), *sha};
        }
        return in;
    }

    // A route whose work runs on the coordinator thread after authentication.
    void on(net::Router& router, const char* method, const char* pattern, Fn fn, Accepts accepts = {}) {
        router.add(
            method, pattern,
            [this, fn = std::move(fn), accepts](net::Request req, net::Responder respond) {
                auto in = prepare(req, accepts);
                if (!in) {
                    respond(error_response(in.error()));
                    return;
                }
                asio::post(ctx, [this, fn, req = std::move(req), in = std::move(*in), respond = std::move(respond)]() {
                    auto who = coord->authenticate(bearer(req));
                    if (!who) {
                        respond(error_response(who.error()));
                        return;
                    }
                    respond(fn(req, in, *who));
                });
            },
            route_options(accepts));
    }

    void schedule_soon() {
        asio::post(ctx, [this] { run_tick(); });
    }

    void run_tick() {
        auto woken = coord->tick();
        for (WorkerId w : woken) {
            answer_pollers(w);
        }
    }

    void answer_pollers(WorkerId w) {
        auto it = pollers.find(w);
        if (it == pollers.end() || it->second.empty()) {
            return;
        }
        Principal p{Role::worker, std::nullopt, w, 0};
        auto list = coord->assignments(p);
        if (!list || list->empty()) {
            return;
        }
        json arr = json::array();
        for (const auto& a : *list) {
            arr.push_back(assignment_json(a));
        }
        for (auto& poller : it->second) {
            poller.timer->cancel();
            poller.respond(ok({{"assignments", arr}}));
        }
        it->second.clear();
    }

    void arm_tick() {
        tick_timer.expires_after(options.tick);
        tick_timer.async_wait([this](boost::system::error_code ec) {
            if (ec || stopped) {
                return;
            }
            run_tick();
            arm_tick();
        });
    }

    net::Router routes();
};

net::Router CoordinatorService::Impl::routes() {
    net::Router r;
    net::RouteOptions no_body; // nothing to read before a token is checked
    no_body.max_body_bytes = 0;
    r.add("GET", "/v1/health", [](net::Request, net::Responder respond) { respond(ok({{"status", "ok"}})); }, no_body);

    // ---- admin ----
    on(r, "POST", "/v1/admin/teams", [this](const net::Request&, const Input& in, const Principal& who) {
        const json* body = &in.body;
        auto name = field<std::string>(*body, "name");
        auto weight = field<std::int64_t>(*body, "weight", std::int64_t{1});
        if (!name || !weight) {
            return error_response(!name ? name.error() : weight.error());
        }
        auto t = coord->create_team(who, *name, *weight);
        if (!t) {
            return error_response(t.error());
        }
        spdlog::info("team {} `{}` created (weight {}) by token {}", t->id.value(), util::escape_control(t->name),
                     t->weight, who.token_id);
        return ok({{"id", t->id.value()}, {"name", t->name}, {"weight", t->weight}}, 201);
    });
    on(r, "GET", "/v1/admin/teams", [this](const net::Request&, const Input&, const Principal& who) {
        if (who.role != Role::admin) {
            return error_response(make_error(ErrorCode::forbidden, "only admins list teams"));
        }
        json out = json::array();
        for (const auto& t : coord->list_teams(who).value()) {
            out.push_back({{"id", t.id.value()}, {"name", t.name}, {"weight", t.weight}});
        }
        return ok({{"teams", out}});
    }, k_no_json_body);
    on(r, "POST", "/v1/admin/tokens", [this](const net::Request&, const Input& in, const Principal& who) {
        const json* body = &in.body;
        auto role_name = field<std::string>(*body, "role");
        auto team = field<std::string>(*body, "team", std::string());
        auto label = field<std::string>(*body, "label", std::string());
        auto uses = field<std::int64_t>(*body, "uses", std::int64_t{1});
        if (!role_name || !team || !label || !uses) {
            return error_response(!role_name ? role_name.error()
                                  : !team    ? team.error()
                                  : !label   ? label.error()
                                             : uses.error());
        }
        auto role = role_from_string(*role_name);
        if (!role) {
            return error_response(
                make_error(ErrorCode::invalid_input, "expected admin, member or enroll", "role"));
        }
        auto tok = coord->create_token(who, *role, *team, *label, *uses);
        if (!tok) {
            return error_response(tok.error());
        }
        spdlog::info("{} token {} created{} by token {}", to_string(tok->role), tok->id,
                     team->empty() ? std::string() : " for team `" + util::escape_control(*team) + "`", who.token_id);
        return ok({{"id", tok->id}, {"token", tok->secret}, {"role", to_string(tok->role)}, {"team", *team}}, 201);
    });
    on(r, "GET", "/v1/admin/tokens", [this](const net::Request& req, const Input&, const Principal& who) {
        std::optional<std::string> team;
        if (auto t = req.query_value("team"); !t.empty()) {
            team = t;
        }
        auto list = coord->list_tokens(who, team);
        if (!list) {
            return error_response(list.error());
        }
        json out = json::array();
        for (const auto& t : *list) {
            out.push_back({{"id", t.id},
                           {"role", to_string(t.role)},
                           {"team", t.team ? json(coord->team_name(*t.team)) : json()},
                           {"worker", t.worker ? json(t.worker->value()) : json()},
                           {"label", t.label},
                           {"created_at", t.created_at},
                           {"revoked_at", opt_json(t.revoked_at)},
                           {"uses_left", opt_json(t.uses_left)},
                           {"last_used_at", opt_json(coord->last_used(t.id))}});
        }
        return ok({{"tokens", out}});
    }, k_no_json_body);
    on(r, "DELETE", "/v1/admin/tokens/{id}", [this](const net::Request& req, const Input&, const Principal& who) {
        auto id = parse_int(req.param("id"), "id");
        if (!id) {
            return error_response(id.error());
        }
        auto st = coord->revoke_token(who, *id);
        if (st) {
            spdlog::info("token {} revoked by token {}", *id, who.token_id);
        }
        return st ? ok({{"revoked", *id}}) : error_response(st.error());
    }, k_no_json_body);
    on(r, "GET", "/v1/workers", [this](const net::Request&, const Input&, const Principal& who) {
        auto list = coord->list_workers(who);
        if (!list) {
            return error_response(list.error());
        }
        json out = json::array();
        for (const auto& w : *list) {
            out.push_back({{"id", w.id.value()},
                           {"team", w.team.value()},
                           {"team_name", coord->team_name(w.team)},
                           {"name", w.name},
                           {"state", to_string(w.state)},
                           {"presence", coord->presence(w.id)},
                           {"last_seen_at", w.last_seen_at},
                           {"inventory", json::parse(w.inventory_json, nullptr, false)}});
        }
        return ok({{"workers", out}});
    }, k_no_json_body);
    for (const auto& [verb, state] : {std::pair{"drain", WorkerState::draining}, std::pair{"activate", WorkerState::active}}) {
        std::string pattern = std::string("/v1/admin/workers/{id}/") + verb;
        WorkerState s = state;
        on(r, "POST", pattern.c_str(), [this, s](const net::Request& req, const Input&, const Principal& who) {
            auto id = parse_int(req.param("id"), "id");
            if (!id) {
                return error_response(id.error());
            }
            auto st = coord->set_worker_state(who, WorkerId(*id), s);
            if (st) {
                spdlog::info("worker {} set {} by token {}", *id, to_string(s), who.token_id);
            }
            return st ? ok({{"worker", *id}, {"state", to_string(s)}}) : error_response(st.error());
        }, k_no_json_body);
    }

    // A ban may void the worker's results since a time: {"void_since": ms} (optional).
    on(r, "POST", "/v1/admin/workers/{id}/ban", [this](const net::Request& req, const Input& in, const Principal& who) {
        auto id = parse_int(req.param("id"), "id");
        if (!id) {
            return error_response(id.error());
        }
        auto since = opt_field(in.body, "void_since");
        if (!since) {
            return error_response(since.error());
        }
        auto voided = coord->ban_worker(who, WorkerId(*id), *since);
        if (!voided) {
            return error_response(voided.error());
        }
        spdlog::info("worker {} banned by token {}{}", *id, who.token_id,
                     *since ? "; " + std::to_string(voided->attempts.size()) + " result(s) voided, " +
                                  std::to_string(voided->refunded_micro) + " micro-credits refunded, " +
                                  std::to_string(voided->requeued.size()) + " job(s) queued again"
                            : std::string());
        json attempts = json::array();
        for (AttemptId a : voided->attempts) {
            attempts.push_back(a.value());
        }
        json requeued = json::array();
        for (JobId j : voided->requeued) {
            requeued.push_back(j.value());
        }
        return ok({{"worker", *id},
                   {"state", to_string(WorkerState::banned)},
                   {"voided_attempts", attempts},
                   {"requeued_jobs", requeued},
                   {"refunded_micro", voided->refunded_micro}});
    }, Accepts{k_max_json_body_bytes, {Role::admin}});

    // ---- researchers ----
    on(r, "POST", "/v1/jobs", [this](const net::Request&, const Input& in, const Principal& who) {
        const json* body = &in.body;
        SubmitRequest sr;
        auto source = field<std::string>(*body, "source", std::string("api"));
        auto max_parallel = field<std::int64_t>(*body, "max_parallel", std::int64_t{0});
        if (!source || !max_parallel) {
            return error_response(!source ? source.error() : max_parallel.error());
        }
        sr.source = *source;
        sr.max_parallel = *max_parallel;
        if (body->contains("team") && (*body)["team"].is_string()) {
            sr.team = (*body)["team"].get<std::string>();
        }
        auto unfunded = field<bool>(*body, "allow_unfunded", false);
        auto key = field<std::string>(*body, "idempotency_key", std::string());
        if (!unfunded || !key) {
            return error_response(!unfunded ? unfunded.error() : key.error());
        }
        sr.allow_unfunded = *unfunded;
        sr.idempotency_key = *key;
        auto jobs = jobs_field(*body);
        if (!jobs) {
            return error_response(jobs.error());
        }
        sr.jobs = std::move(*jobs);
        auto res = coord->submit(who, std::move(sr));
        if (!res) {
            return error_response(res.error());
        }
        json ids = json::array();
        for (JobId id : res->jobs) {
            ids.push_back(id.value());
        }
        schedule_soon();
        return ok({{"sweep_id", res->sweep_id}, {"jobs", ids}}, 201);
    }, Accepts{k_max_submit_bytes, {Role::member, Role::admin}});
    on(r, "GET", "/v1/jobs", [this](const net::Request& req, const Input&, const Principal& who) {
        JobQuery q;
        if (auto s = req.query_value("state"); !s.empty()) {
            q.state = job_state_from_string(s);
            if (!q.state) {
                return error_response(make_error(ErrorCode::invalid_input, "unknown state `" + s + "`", "state"));
            }
        }
        auto sweep = positive_query(req, "sweep");
        auto limit = positive_query(req, "limit");
        auto before = positive_query(req, "before");
        if (!sweep || !limit || !before) {
            return error_response(!sweep ? sweep.error() : !limit ? limit.error() : before.error());
        }
        q.sweep = *sweep;
        q.limit = static_cast<std::size_t>(limit->value_or(0));
        if (*before) {
            q.before = JobId(**before);
        }
        q.all_teams = req.query_value("all_teams") == "1" || req.query_value("all_teams") == "true";
        if (auto by = req.query_value("submitter"); !by.empty()) {
            q.submitter_label = by;
        }
        if (req.query_value("mine") == "1" || req.query_value("mine") == "true") {
            q.submitter_token = who.token_id;
        }
        auto list = coord->jobs(who, q);
        if (!list) {
            return error_response(list.error());
        }
        json out = json::array();
        for (const auto& j : list->jobs) {
            out.push_back({{"id", j.id.value()},
                           {"sweep_id", j.sweep_id},
                           {"team", j.team.value()},
                           {"team_name", coord->team_name(j.team)},
                           {"submitted_by", coord->submitter_of(j.id)},
                           {"name", j.spec.name},
                           {"sweep_index", j.spec.sweep_index},
                           {"state", to_string(j.state)},
                           {"attempts", j.attempts},
                           {"exit_code", j.exit_code ? json(*j.exit_code) : json()},
                           {"reason", j.state == JobState::queued ? coord->waiting_reason(j.id) : j.reason},
                           {"cost_micro", coord->job_cost_micro(j.id)}});
        }
        return ok({{"jobs", out}, {"more", list->more}});
    }, k_no_json_body);
    on(r, "GET", "/v1/jobs/{id}", [this](const net::Request& req, const Input&, const Principal& who) {
        auto id = parse_int(req.param("id"), "id");
        if (!id) {
            return error_response(id.error());
        }
        auto j = coord->job(who, JobId(*id));
        if (!j) {
            return error_response(j.error());
        }
        return ok(job_json(*coord, *j, coord->attempts_of(j->id), coord->waiting_reason(j->id)));
    }, k_no_json_body);
    on(r, "POST", "/v1/jobs/{id}/cancel", [this](const net::Request& req, const Input&, const Principal& who) {
        auto id = parse_int(req.param("id"), "id");
        if (!id) {
            return error_response(id.error());
        }
        auto st = coord->cancel_job(who, JobId(*id));
        return st ? ok({{"cancelled", json::array({*id})}}) : error_response(st.error());
    }, k_no_json_body);
    on(r, "POST", "/v1/sweeps/{id}/cancel", [this](const net::Request& req, const Input&, const Principal& who) {
        auto id = parse_int(req.param("id"), "id");
        if (!id) {
            return error_response(id.error());
        }
        auto n = coord->cancel_sweep(who, *id);
        return n ? ok({{"sweep_id", *id}, {"cancelled", *n}}) : error_response(n.error());
    }, k_no_json_body);
    on(r, "GET", "/v1/jobs/{id}/logs", [this](const net::Request& req, const Input&, const Principal& who) {
        auto id = parse_int(req.param("id"), "id");
        auto offset = parse_int(req.query_value("offset").empty() ? "0" : req.query_value("offset"), "offset");
        if (!id || !offset) {
            return error_response(!id ? id.error() : offset.error());
        }
        std::optional<AttemptId> attempt;
        if (auto a = req.query_value("attempt"); !a.empty()) {
            auto v = parse_int(a, "attempt");
            if (!v) {
                return error_response(v.error());
            }
            attempt = AttemptId(*v);
        }
        auto slice = coord->read_logs(who, JobId(*id), *offset, attempt);
        if (!slice) {
            return error_response(slice.error());
        }
        json out = {{"attempt", slice->attempt.value()},
                    {"offset", *offset},
                    {"next_offset", slice->next_offset},
                    {"finished", slice->finished},
                    {"data", slice->data}};
        // JSON strings are UTF-8: invalid bytes are replaced in `data`; offsets count raw bytes.
        return net::json_response(200, out.dump(-1, ' ', false, json::error_handler_t::replace));
    }, k_no_json_body);
    on(r, "GET", "/v1/jobs/{id}/outputs", [this](const net::Request& req, const Input&, const Principal& who) {
        auto id = parse_int(req.param("id"), "id");
        if (!id) {
            return error_response(id.error());
        }
        return bytes_response(coord->read_output(who, JobId(*id)));
    }, k_no_json_body);

    on(r, "PUT", "/v1/inputs/{sha256}", [this](const net::Request& req, const Input& in, const Principal& who) {
        std::optional<std::string> team;
        if (auto t = req.query_value("team"); !t.empty()) {
            team = t;
        }
        auto st = coord->put_inputs(who, req.param("sha256"), *in.file, team);
        return st ? ok({{"sha256", req.param("sha256")}, {"bytes", in.file->size}}, 201) : error_response(st.error());
    }, Accepts{coordinator::k_max_input_archive_bytes + 1, {Role::member, Role::admin}, false, true});

    // ---- workers ----
    on(r, "POST", "/v1/workers/register", [this](const net::Request&, const Input& in, const Principal& who) {
        const json* body = &in.body;
        auto name = field<std::string>(*body, "name");
        if (!name) {
            return error_response(name.error());
        }
        auto inventory = api::inventory_from_json(body->value("inventory", json()));
        if (!inventory) {
            return error_response(inventory.error());
        }
        auto reg = coord->register_worker(who, *name, *inventory);
        if (!reg) {
            return error_response(reg.error());
        }
        spdlog::info("worker {} `{}` registered for team `{}`", reg->worker.value(), util::escape_control(*name),
                     util::escape_control(coord->team_name(*who.team)));
        for (const auto& w : reg->warnings) {
            spdlog::warn("worker `{}`: {}", util::escape_control(*name), util::escape_control(w));
        }
        return ok({{"worker_id", reg->worker.value()}, {"token", reg->secret}, {"warnings", reg->warnings}}, 201);
    }, Accepts{k_max_json_body_bytes, {Role::enroll}});
    on(r, "POST", "/v1/workers/heartbeat", [this](const net::Request&, const Input& in, const Principal& who) {
        const json* body = &in.body;
        auto running = field<std::vector<std::int64_t>>(*body, "running", std::vector<std::int64_t>{});
        if (!running) {
            return error_response(running.error());
        }
        auto unhealthy = field<std::vector<std::int64_t>>(*body, "unhealthy_gpus", std::vector<std::int64_t>{});
        if (!unhealthy) {
            return error_response(unhealthy.error());
        }
        std::vector<AttemptId> ids;
        for (auto v : *running) {
            ids.emplace_back(v);
        }
        auto draining = field<bool>(*body, "draining", false);
        auto paused = field<bool>(*body, "paused", false);
        if (!draining || !paused) {
            return error_response(!draining ? draining.error() : paused.error());
        }
        std::optional<api::Inventory> inventory;
        if (auto it = body->find("inventory"); it != body->end() && !it->is_null()) {
            auto parsed = api::inventory_from_json(*it);
            if (!parsed) {
                return error_response(parsed.error());
            }
            inventory = std::move(*parsed);
        }
        auto reply = coord->heartbeat(who, ids, *unhealthy, *draining, inventory ? &*inventory : nullptr, *paused);
        if (!reply) {
            return error_response(reply.error());
        }
        for (const auto& w : reply->warnings) {
            spdlog::warn("worker {}: {}", who.worker->value(), util::escape_control(w));
        }
        json stop = json::array();
        for (AttemptId a : reply->stop) {
            stop.push_back(a.value());
        }
        return ok({{"stop", stop}, {"lease_ms", reply->lease_ms}});
    }, Accepts{k_max_json_body_bytes, {Role::worker}});
    // Long poll: answered at once when work is waiting, else parked until work or the wait ends.
    r.add("POST", "/v1/workers/poll", [this](net::Request req, net::Responder respond) {
        asio::post(ctx, [this, req = std::move(req), respond = std::move(respond)]() mutable {
            auto who = coord->authenticate(bearer(req));
            if (!who) {
                respond(error_response(who.error()));
                return;
            }
            auto list = coord->assignments(*who);
            if (!list) {
                respond(error_response(list.error()));
                return;
            }
            auto wait = parse_int(req.query_value("wait_ms").empty() ? "0" : req.query_value("wait_ms"), "wait_ms");
            if (!wait || *wait < 0) {
                respond(error_response(wait ? make_error(ErrorCode::invalid_input, "must be 0 or more", "wait_ms")
                                            : wait.error()));
                return;
            }
            if (!list->empty() || *wait == 0 || stopped) {
                json arr = json::array();
                for (const auto& a : *list) {
                    arr.push_back(assignment_json(a));
                }
                respond(ok({{"assignments", arr}}));
                return;
            }
            auto timer = std::make_shared<asio::steady_timer>(ctx);
            timer->expires_after(std::min(std::chrono::milliseconds(*wait), options.max_poll_wait));
            WorkerId w = *who->worker;
            pollers[w].push_back({std::move(respond), timer});
            timer->async_wait([this, w, timer](boost::system::error_code ec) {
                if (ec) {
                    return; // answered early
                }
                auto& list2 = pollers[w];
                for (auto it = list2.begin(); it != list2.end(); ++it) {
                    if (it->timer == timer) {
                        it->respond(ok({{"assignments", json::array()}}));
                        list2.erase(it);
                        break;
                    }
                }
            });
        });
    }, route_options(Accepts{k_max_json_body_bytes, {Role::worker}}));
    on(r, "GET", "/v1/attempts/{id}/inputs", [this](const net::Request& req, const Input&, const Principal& who) {
        auto id = parse_int(req.param("id"), "id");
        if (!id) {
            return error_response(id.error());
        }
        return bytes_response(coord->read_inputs(who, AttemptId(*id)));
    }, k_no_json_body);
    on(r, "POST", "/v1/attempts/{id}/start", [this](const net::Request& req, const Input&, const Principal& who) {
        auto id = parse_int(req.param("id"), "id");
        if (!id) {
            return error_response(id.error());
        }
        auto st = coord->start_attempt(who, AttemptId(*id));
        return st ? ok({{"attempt", *id}, {"state", "running"}}) : error_response(st.error());
    }, k_no_json_body);
    on(r, "POST", "/v1/attempts/{id}/logs", [this](const net::Request& req, const Input&, const Principal& who) {
        auto id = parse_int(req.param("id"), "id");
        auto offset = parse_int(req.query_value("offset"), "offset");
        if (!id || !offset) {
            return error_response(!id ? id.error() : offset.error());
        }
        auto res = coord->append_log(who, AttemptId(*id), *offset, req.body);
        if (!res) {
            return error_response(res.error());
        }
        return ok({{"stored", res->stored_bytes}, {"length", res->length}});
    }, Accepts{std::size_t{4} * 1024 * 1024, {Role::worker}, false});
    on(r, "PUT", "/v1/attempts/{id}/outputs", [this](const net::Request& req, const Input& in, const Principal& who) {
        auto id = parse_int(req.param("id"), "id");
        if (!id) {
            return error_response(id.error());
        }
        auto st = coord->upload_output(who, AttemptId(*id), *in.file);
        return st ? ok({{"attempt", *id}, {"bytes", in.file->size}}) : error_response(st.error());
    }, Accepts{std::size_t{900} * 1024 * 1024, {Role::worker}, false, true});
    on(r, "POST", "/v1/attempts/{id}/complete", [this](const net::Request& req, const Input& in, const Principal& who) {
        auto id = parse_int(req.param("id"), "id");
        if (!id) {
            return error_response(id.error());
        }
        const json* body = &in.body;
        auto exit_code = opt_field(*body, "exit_code");
        auto reason = field<std::string>(*body, "reason", std::string());
        auto outcome_name = field<std::string>(*body, "outcome", std::string("exited"));
        if (!exit_code || !reason || !outcome_name) {
            return error_response(!exit_code ? exit_code.error() : !reason ? reason.error() : outcome_name.error());
        }
        auto outcome = outcome_from_string(*outcome_name);
        if (!outcome) {
            return error_response(make_error(ErrorCode::invalid_input,
                                             "expected exited, worker_fault or owner_preempted, got `" +
                                                 *outcome_name + "`",
                                             "outcome"));
        }
        auto st = coord->complete_attempt(who, AttemptId(*id), *exit_code, *reason, *outcome);
        if (st) {
            schedule_soon();
        }
        return st ? ok({{"attempt", *id}, {"exit_code", opt_json(*exit_code)}, {"outcome", *outcome_name}})
                  : error_response(st.error());
    });

    // ---- credits ----
    on(r, "POST", "/v1/admin/grants", [this](const net::Request&, const Input& in, const Principal& who) {
        const json* body = &in.body;
        auto team = field<std::string>(*body, "team");
        auto amount = field<std::int64_t>(*body, "amount_micro");
        auto note = field<std::string>(*body, "note", std::string());
        auto expires = opt_field(*body, "expires_at");
        if (!team || !amount || !note || !expires) {
            return error_response(!team ? team.error() : !amount ? amount.error() : !note ? note.error() : expires.error());
        }
        auto g = coord->grant(who, *team, *amount, *expires, *note);
        if (!g) {
            return error_response(g.error());
        }
        spdlog::info("grant {}: {} micro-credits to team `{}` by token {}", g->id, g->amount,
                     util::escape_control(*team), who.token_id);
        schedule_soon();
        return ok({{"grant", g->id},
                   {"team", *team},
                   {"amount_micro", g->amount},
                   {"expires_at", opt_json(g->expires_at)},
                   {"balance_micro", coord->ledger().balance(credits::Account::of_team(g->team.value()))}},
                  201);
    });
    on(r, "POST", "/v1/admin/adjustments", [this](const net::Request&, const Input& in, const Principal& who) {
        const json* body = &in.body;
        auto team = field<std::string>(*body, "team");
        auto amount = field<std::int64_t>(*body, "amount_micro");
        auto note = field<std::string>(*body, "note", std::string());
        if (!team || !amount || !note) {
            return error_response(!team ? team.error() : !amount ? amount.error() : note.error());
        }
        auto e = coord->adjust(who, *team, *amount, *note);
        if (!e) {
            return error_response(e.error());
        }
        spdlog::info("adjustment {}: {} micro-credits for team `{}` by token {} ({})", e->id, *amount,
                     util::escape_control(*team), who.token_id, util::escape_control(*note));
        schedule_soon();
        json out = entry_json(*e);
        out["team"] = *team;
        return ok(out, 201);
    });
    on(r, "POST", "/v1/admin/budgets", [this](const net::Request&, const Input& in, const Principal& who) {
        const json& body = in.body;
        auto team = field<std::string>(body, "team");
        auto member = field<std::string>(body, "member", std::string());
        if (!team || !member) {
            return error_response(!team ? team.error() : member.error());
        }
        BudgetChange change{*team, *member};
        // A cap left out keeps its value; null removes it.
        for (auto [cap, key] : {std::pair{&change.day, "day_micro"}, std::pair{&change.week, "week_micro"}}) {
            if (!body.contains(key)) {
                continue;
            }
            auto v = opt_field(body, key);
            if (!v) {
                return error_response(v.error());
            }
            *cap = *v ? CapChange::set(**v) : CapChange::remove();
        }
        auto b = coord->change_budget(who, change);
        if (!b) {
            return error_response(b.error());
        }
        auto cap = [](const std::optional<std::int64_t>& v) { return v ? std::to_string(*v) : std::string("none"); };
        spdlog::info("budget of {}team `{}`: {} per day, {} per week (micro-credits) by token {}",
                     member->empty() ? "" : "member `" + util::escape_control(b->label) + "` of ",
                     util::escape_control(*team), cap(b->day_micro), cap(b->week_micro), who.token_id);
        schedule_soon();
        json out = {{"team", *team}, {"day_micro", opt_json(b->day_micro)}, {"week_micro", opt_json(b->week_micro)}};
        if (!member->empty()) {
            out["member"] = member_budget_json(*b);
        }
        return ok(out);
    });
    on(r, "GET", "/v1/whoami", [this](const net::Request&, const Input&, const Principal& who) {
        json out = {{"role", to_string(who.role)}, {"token_id", who.token_id}, {"label", coord->token_name(who.token_id)}};
        out["team"] = who.team ? json(coord->team_name(*who.team)) : json();
        out["worker"] = who.worker ? json(who.worker->value()) : json();
        return ok(out);
    }, k_no_json_body);
    on(r, "GET", "/v1/credits", [this](const net::Request& req, const Input&, const Principal& who) {
        std::optional<std::string> team;
        if (auto t = req.query_value("team"); !t.empty()) {
            team = t;
        }
        std::int64_t limit = 20;
        if (auto l = req.query_value("limit"); !l.empty()) {
            auto v = parse_int(l, "limit");
            if (!v || *v < 0 || *v > 10'000) {
                return error_response(v ? make_error(ErrorCode::invalid_input, "must be 0-10000", "limit") : v.error());
            }
            limit = *v;
        }
        auto v = coord->credits_of(who, team, static_cast<std::size_t>(limit));
        if (!v) {
            return error_response(v.error());
        }
        json moves = json::array();
        for (const auto& e : v->movements) {
            json m = entry_json(e);
            // In the reader's words: team names, and the job an attempt's row is about (its name
            // only for the team's own jobs).
            m["payer_team_name"] = e.payer != 0 ? json(coord->team_name(TeamId(e.payer))) : json();
            m["job"] = json();
            m["job_name"] = json();
            if (e.attempt != 0) {
                if (const JobRecord* j = coord->job_of_attempt(AttemptId(e.attempt))) {
                    m["job"] = j->id.value();
                    m["job_name"] = j->team == v->team ? json(j->spec.name) : json();
                }
            }
            moves.push_back(std::move(m));
        }
        json members = json::array();
        for (const auto& m : v->members) {
            members.push_back(member_budget_json(m));
        }
        return ok({{"team", v->name},
                   {"team_id", v->team.value()},
                   {"balance_micro", v->balance_micro},
                   {"held_micro", v->held_micro},
                   {"settling_micro", v->settling_micro},
                   {"budget_day_micro", opt_json(v->budget_day_micro)},
                   {"budget_week_micro", opt_json(v->budget_week_micro)},
                   {"spent_day_micro", v->spent_day_micro},
                   {"spent_week_micro", v->spent_week_micro},
                   {"members", members},
                   {"movements", moves}});
    }, k_no_json_body);
    on(r, "GET", "/v1/admin/report", [this](const net::Request& req, const Input&, const Principal& who) {
        std::int64_t since = 0;
        if (auto s = req.query_value("since"); !s.empty()) {
            auto v = parse_int(s, "since");
            if (!v) {
                return error_response(v.error());
            }
            since = *v;
        }
        auto rep = coord->report(who, since);
        if (!rep) {
            return error_response(rep.error());
        }
        json teams = json::array();
        for (const auto& t : rep->teams) {
            teams.push_back({{"team", t.name},
                             {"team_id", t.team.value()},
                             {"granted_micro", t.granted_micro},
                             {"earned_micro", t.earned_micro},
                             {"spent_micro", t.spent_micro},
                             {"balance_micro", t.balance_micro},
                             {"held_micro", t.held_micro},
                             {"settling_micro", t.settling_micro},
                             {"refunded_micro", t.refunded_micro}});
        }
        json workers = json::array();
        for (const auto& w : rep->workers) {
            workers.push_back({{"worker", w.worker.value()},
                               {"name", w.name},
                               {"team_id", w.team.value()},
                               {"gpu_hours", w.gpu_hours},
                               {"attempts", w.attempts},
                               {"failures", w.failures},
                               {"earned_micro", w.earned_micro},
                               {"voided", w.voided}});
        }
        return ok({{"since", rep->since_ms},
                   {"teams", teams},
                   {"workers", workers},
                   {"pool_fee_micro", rep->pool_fee_micro},
                   {"escrow_micro", rep->escrow_micro},
                   {"settling_micro", rep->settling_micro},
                   {"issuer_micro", rep->issuer_micro}});
    }, k_no_json_body);
    on(r, "POST", "/v1/estimate", [this](const net::Request&, const Input& in, const Principal& who) {
        const json* body = &in.body;
        auto source = field<std::string>(*body, "source", std::string("api"));
        if (!source) {
            return error_response(source.error());
        }
        std::optional<std::string> team;
        if (body->contains("team") && (*body)["team"].is_string()) {
            team = (*body)["team"].get<std::string>();
        }
        auto jobs = jobs_field(*body);
        if (!jobs) {
            return error_response(jobs.error());
        }
        auto est = coord->estimate(who, *source, *jobs, team);
        if (!est) {
            return error_response(est.error());
        }
        json list = json::array();
        for (const auto& j : est->jobs) {
            list.push_back({{"name", j.name},
                            {"gpu_model", j.gpu_model},
                            {"price_micro_per_hour", j.price_micro_per_hour},
                            {"max_micro", j.max_micro},
                            {"estimate_micro", j.estimate_micro},
                            {"runtime_s", j.runtime_s},
                            {"history_runs", j.history_runs}});
        }
        return ok({{"jobs", list},
                   {"total_max_micro", est->total_max_micro},
                   {"total_estimate_micro", est->total_estimate_micro},
                   {"available_micro", est->available_micro},
                   {"budget_room_micro", opt_json(est->budget_room_micro)},
                   {"enforced", est->enforced}});
    }, Accepts{k_max_submit_bytes, {Role::member, Role::admin}});
    return r;
}

CoordinatorService::CoordinatorService(ServiceOptions options) : m_impl(std::make_unique<Impl>()) {
    m_impl->options = std::move(options);
}

CoordinatorService::~CoordinatorService() { stop(); }

Result<util::FileLock> lock_database(const std::filesystem::path& db_path) {
    auto lock = util::FileLock::acquire(db_path.string() + ".lock");
    if (!lock && lock.error().code == ErrorCode::conflict) {
        return make_error(ErrorCode::conflict, "another gpupool coordinator is using " + db_path.string() +
                                                   " (it holds " + db_path.string() + ".lock); stop it first");
    }
    return lock;
}

Result<IssuedToken> recover_admin_token(const std::filesystem::path& db_path) {
    auto lock = lock_database(db_path);
    if (!lock) {
        return lock.error();
    }
    if (!std::filesystem::exists(db_path)) {
        return make_error(ErrorCode::not_found, "no pool database at " + db_path.string(), "--db");
    }
    auto store = SqliteStore::open(db_path);
    if (!store) {
        return store.error();
    }
    SystemClock clock;
    Coordinator coord(**store, clock);
    if (auto st = coord.start(); !st) {
        return st.error();
    }
    return coord.recover_admin();
}

Status CoordinatorService::start(std::string* first_admin_token) {
    Impl& s = *m_impl;
    auto lock = lock_database(s.options.db_path);
    if (!lock) {
        return lock.error();
    }
    s.db_lock.emplace(std::move(*lock));
    auto store = SqliteStore::open(s.options.db_path);
    if (!store) {
        return store.error();
    }
    s.store = std::move(*store);
    s.coord = std::make_unique<Coordinator>(*s.store, s.clock, s.options.coordinator);
    if (auto st = s.coord->start(); !st) {
        return st;
    }
    spdlog::info("coordinator state loaded from {}: {} jobs", s.options.db_path.string(),
                 s.coord->job_count());
    if (!s.coord->has_admin()) {
        auto tok = s.coord->init_admin();
        if (!tok) {
            return tok.error();
        }
        if (first_admin_token != nullptr) {
            *first_admin_token = tok->secret;
        }
    }
    s.server = std::make_unique<net::HttpServer>(s.options.http, s.routes());
    s.guard.emplace(s.ctx.get_executor());
    s.thread = std::thread([&s] { s.ctx.run(); });
    s.arm_tick();
    if (auto st = s.server->start(); !st) {
        stop();
        return st;
    }
    return {};
}

void CoordinatorService::stop() {
    Impl& s = *m_impl;
    if (!s.thread.joinable()) {
        return;
    }
    // Answer parked polls on the coordinator thread, then let the server finish in-flight work.
    std::promise<void> done;
    asio::post(s.ctx, [&s, &done] {
        s.stopped = true;
        s.tick_timer.cancel();
        for (auto& [w, list] : s.pollers) {
            for (auto& p : list) {
                p.timer->cancel();
                p.respond(ok({{"assignments", json::array()}}));
            }
        }
        s.pollers.clear();
        done.set_value();
    });
    done.get_future().wait();
    if (s.server) {
        s.server->stop();
    }
    s.guard.reset();
    s.thread.join();
    s.coord.reset();
    s.store.reset(); // nothing more is written: another process may take the database now
    s.db_lock.reset();
}

std::uint16_t CoordinatorService::port() const { return m_impl->server ? m_impl->server->port() : 0; }

std::vector<net::RouteInfo> CoordinatorService::routes() const {
    return m_impl->server ? m_impl->server->router().routes() : std::vector<net::RouteInfo>{};
}

} // namespace gpupool::coordinator

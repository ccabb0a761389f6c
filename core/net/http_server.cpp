#include "core/net/http_server.hpp"

#include "core/net/url.hpp"
#include "core/util/strings.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <openssl/ssl.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

namespace gpupool::net {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;

constexpr std::size_t k_raw_read_bytes = 4096;
constexpr std::chrono::milliseconds k_linger{1000};       // drain time after our last response
constexpr std::chrono::milliseconds k_force_grace{1000};  // stop(): after answering 503s
constexpr std::chrono::milliseconds k_accept_retry{100};  // accept failed (e.g. out of descriptors)

// Responders post into the server only while this is open; stop() closes it before the io_context
// goes away, so a Responder called later (from any thread) does nothing.
class Gate {
public:
    template <class F>
    void run(F&& f) {
        std::lock_guard lock(m_mutex);
        if (m_open) {
            f();
        }
    }
    void close() {
        std::lock_guard lock(m_mutex);
        m_open = false;
    }

private:
    std::mutex m_mutex;
    bool m_open = true;
};

class SessionBase : public std::enable_shared_from_this<SessionBase> {
public:
    virtual ~SessionBase() = default;
    // Posted from any thread.
    virtual void post_start() = 0;
    virtual void post_reply(std::uint64_t seq, Response response, bool dropped) = 0;
    virtual void post_admitted(std::uint64_t seq, std::optional<Response> refusal) = 0;
    virtual void post_begin_stop() = 0;
    virtual void post_force_stop() = 0;
};

// What the server and its sessions share.
struct Core {
    ServerOptions options;
    Router router;
    std::shared_ptr<Gate> gate = std::make_shared<Gate>();
    std::atomic<bool> stopping{false};

    std::mutex sessions_mutex;
    std::condition_variable sessions_cv;
    std::unordered_map<std::uint64_t, std::shared_ptr<SessionBase>> sessions;
    std::unordered_map<std::uint64_t, std::string> session_client; // id -> remote address
    std::unordered_map<std::string, std::size_t> per_client;       // remote address -> sessions
    std::uint64_t next_id = 1;
    // Spooled bodies alive (being received or handled); shared with the slots, which may outlive us.
    std::shared_ptr<std::atomic<std::size_t>> file_bodies = std::make_shared<std::atomic<std::size_t>>(0);

    Core(ServerOptions o, Router r) : options(std::move(o)), router(std::move(r)) {}

    // One of max_file_bodies slots, released when the last copy is dropped; null when all are taken.
    std::shared_ptr<void> take_file_slot() {
        auto counter = file_bodies;
        std::size_t n = counter->load();
        do {
            if (n >= options.max_file_bodies) {
                return nullptr;
            }
        } while (!counter->compare_exchange_weak(n, n + 1));
        return std::shared_ptr<void>(counter.get(), [counter](void*) { counter->fetch_sub(1); });
    }

    // Registers a session unless its address already has max_connections_per_client; under the lock.
    bool admit_client_locked(std::uint64_t id, const std::string& address) {
        std::size_t& n = per_client[address];
        if (options.max_connections_per_client != 0 && n >= options.max_connections_per_client) {
            if (n == 0) {
                per_client.erase(address);
            }
            return false;
        }
        ++n;
        session_client.emplace(id, address);
        return true;
    }

    std::size_t session_count() {
        std::lock_guard lock(sessions_mutex);
        return sessions.size();
    }

    std::vector<std::shared_ptr<SessionBase>> snapshot() {
        std::lock_guard lock(sessions_mutex);
        std::vector<std::shared_ptr<SessionBase>> out;
        out.reserve(sessions.size());
        for (auto& [id, s] : sessions) {
            out.push_back(s);
        }
        return out;
    }

    void remove(std::uint64_t id) {
        std::shared_ptr<SessionBase> doomed; // destroyed outside the lock
        {
            std::lock_guard lock(sessions_mutex);
            auto it = sessions.find(id);
            if (it == sessions.end()) {
                return;
            }
            doomed = std::move(it->second);
            sessions.erase(it);
            if (auto c = session_client.find(id); c != session_client.end()) {
                if (auto p = per_client.find(c->second); p != per_client.end() && --p->second == 0) {
                    per_client.erase(p);
                }
                session_client.erase(c);
            }
            if (sessions.empty()) {
                sessions_cv.notify_all();
            }
        }
    }

    // Waits until no session is left or `deadline` passes; true when none is left.
    bool wait_empty(std::chrono::steady_clock::time_point deadline) {
        std::unique_lock lock(sessions_mutex);
        return sessions_cv.wait_until(lock, deadline, [&] { return sessions.empty(); });
    }
};

// One Responder's shared state: answered at most once; answering when the last copy is dropped.
struct ReplyState {
    std::shared_ptr<Gate> gate;
    std::weak_ptr<SessionBase> session;
    std::uint64_t seq = 0;
    std::atomic<bool> answered{false};

    void answer(Response response, bool dropped) {
        if (answered.exchange(true)) {
            return;
        }
        gate->run([&] {
            if (auto s = session.lock()) {
                s->post_reply(seq, std::move(response), dropped);
            }
        });
    }

    ~ReplyState() {
        if (!answered.load()) {
            answer(Response{}, true);
        }
    }
};

// One admission's shared state: decided at most once; refused (500) when the last copy is dropped.
struct AdmitState {
    std::shared_ptr<Gate> gate;
    std::weak_ptr<SessionBase> session;
    std::uint64_t seq = 0;
    std::atomic<bool> decided{false};

    void decide(std::optional<Response> refusal) {
        if (decided.exchange(true)) {
            return;
        }
        gate->run([&] {
            if (auto s = session.lock()) {
                s->post_admitted(seq, std::move(refusal));
            }
        });
    }

    ~AdmitState() {
        if (!decided.load()) {
            decide(json_error(500, "no_response", "the server dropped this request without deciding on it"));
        }
    }
};

bool is_parse_error(const error_code& ec) {
    return ec.category() == http::make_error_code(http::error::bad_method).category() &&
           ec != http::error::end_of_stream && ec != http::error::partial_message;
}

bool is_sane_status(int status) {
    return status >= 200 && status <= 999;
}

template <class Stream>
class Session final : public SessionBase {
public:
    static constexpr bool k_tls = !std::is_same_v<Stream, beast::tcp_stream>;

    template <class... StreamArgs>
    Session(std::shared_ptr<Core> core, std::uint64_t id, tcp::endpoint remote, StreamArgs&&... args)
        : m_core(std::move(core)), m_id(id), m_remote(std::move(remote)), m_stream(std::forward<StreamArgs>(args)...),
          m_timer(m_stream.get_executor()) {}

    void post_start() override {
        asio::post(m_stream.get_executor(), [self = self()] { self->start(); });
    }

    void post_reply(std::uint64_t seq, Response response, bool dropped) override {
        asio::post(m_stream.get_executor(), [self = self(), seq, r = std::move(response), dropped]() mutable {
            self->on_reply(seq, std::move(r), dropped);
        });
    }

    void post_admitted(std::uint64_t seq, std::optional<Response> refusal) override {
        asio::post(m_stream.get_executor(), [self = self(), seq, r = std::move(refusal)]() mutable {
            self->on_admitted(seq, std::move(r));
        });
    }

    void post_begin_stop() override {
        asio::post(m_stream.get_executor(), [self = self()] { self->begin_stop(); });
    }

    void post_force_stop() override {
        asio::post(m_stream.get_executor(), [self = self()] { self->force_stop(); });
    }

private:
    enum class State { handshake, reading_header, admitting, reading_body, handling, writing, idle, lingering, closed };

    void start() {
        if (m_core->stopping.load()) {
            close_now();
            return;
        }
        if constexpr (k_tls) {
            m_state = State::handshake;
            lowest().expires_after(m_core->options.header_timeout);
            m_stream.async_handshake(ssl::stream_base::server, [self = self()](const error_code& ec) {
                self->on_handshake(ec);
            });
        } else {
            read_header();
        }
    }

    std::shared_ptr<Session> self() { return std::static_pointer_cast<Session>(shared_from_this()); }
    beast::tcp_stream& lowest() { return beast::get_lowest_layer(m_stream); }

    // ---- reading ------------------------------------------------------------------------------

    void on_handshake(const error_code& ec) {
        if (ec) {
            close_now();
            return;
        }
        read_header();
    }

    // Between requests: parse what is buffered, else wait (idle) for the next request's first bytes.
    void read_next() {
        if (m_core->stopping.load()) {
            close_now(); // an idle keep-alive connection, as stop() closes the others
            return;
        }
        if (m_buffer.size() > 0) {
            read_header();
            return;
        }
        m_state = State::idle;
        arm_timer(m_core->options.idle_timeout);
        start_raw_read();
    }

    void read_header() {
        m_state = State::reading_header;
        m_parser.reset();
        m_file_parser.reset();
        m_body_file.reset();
        m_head.emplace();
        m_head->header_limit(static_cast<std::uint32_t>(
            std::min<std::size_t>(m_core->options.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
        m_head->body_limit(boost::none); // checked against the route's limit once the header is in
        lowest().expires_after(m_core->options.header_timeout);
        http::async_read_header(m_stream, m_buffer, *m_head,
                                [self = self()](const error_code& ec, std::size_t) { self->on_header(ec); });
    }

    void on_header(const error_code& ec) {
        if (m_state == State::closed) {
            return;
        }
        if (ec) {
            if (ec == http::error::header_limit) {
                fail(431, "headers_too_large", "the request header is larger than the server accepts");
            } else if (is_parse_error(ec)) {
                fail(400, "bad_request", "malformed HTTP request: " + ec.message());
            } else {
                close_now(); // closed, reset or timed out before a whole header arrived
            }
            return;
        }
        auto& msg = m_head->get();
        m_version = msg.version();
        m_keep_alive = msg.keep_alive();
        std::string_view target(msg.target().data(), msg.target().size());
        if (target.empty() || target.front() != '/') {
            fail(400, "bad_request", "the request target must be an absolute path");
            return;
        }
        auto parts = split_target(target);
        std::string_view method(msg.method_string().data(), msg.method_string().size());
        m_match = m_core->router.match(method, parts.path);
        if (m_match.kind != Router::Match::Kind::found) {
            answer_unmatched(); // the body, if any, is never read
            return;
        }
        const RouteOptions& ro = *m_match.options;
        m_body_limit = ro.max_body_bytes.value_or(m_core->options.max_body_bytes);
        auto length = m_head->content_length();
        if (length && *length > m_body_limit) {
            fail(413, "body_too_large",
                 "the request body has " + std::to_string(*length) + " bytes; this endpoint accepts at most " +
                     std::to_string(m_body_limit));
            return;
        }
        auto expect = msg[http::field::expect];
        m_expect_continue =
            !m_head->is_done() && iequals(std::string_view(expect.data(), expect.size()), "100-continue");
        if (ro.admit) {
            admit(ro.admit);
            return;
        }
        begin_body();
    }

    // 404 or 405 from the header alone; a connection with an unread body is closed after it.
    void answer_unmatched() {
        const auto& msg = m_head->get();
        const std::string method(msg.method_string());
        auto parts = split_target(std::string_view(msg.target().data(), msg.target().size()));
        auto path = percent_decode(parts.path);
        if (!path) {
            fail(400, "bad_request", "malformed percent-encoding in the request target");
            return;
        }
        if (!m_head->is_done()) {
            m_keep_alive = false;
        }
        const std::string shown = util::escape_control(*path);
        if (m_match.kind == Router::Match::Kind::not_found) {
            write_response(json_error(404, "not_found", "no endpoint " + method + " " + shown));
            return;
        }
        std::string allow;
        for (const auto& m : m_match.allowed) {
            allow += (allow.empty() ? "" : ", ") + m;
        }
        Response r = json_error(405, "method_not_allowed", method + " is not allowed on " + shown + " (allowed: " + allow + ")");
        r.headers.set("Allow", allow);
        write_response(std::move(r));
    }

    // The request line and headers as a Request (no body yet); false on bad percent-encoding.
    template <class Message>
    bool fill_head(const Message& msg, Request& req) {
        req.method = std::string(msg.method_string());
        req.target = std::string(msg.target());
        auto parts = split_target(req.target);
        auto path = percent_decode(parts.path);
        auto query = parse_query(parts.query);
        if (!path || !query) {
            return false;
        }
        req.path = std::move(*path);
        req.query = std::move(*query);
        req.route = m_match.pattern;
        req.path_params = m_match.params;
        for (const auto& field : msg) {
            req.headers.add(std::string(field.name_string()), std::string(field.value()));
        }
        req.remote_address = m_remote.address().to_string();
        req.remote_port = m_remote.port();
        req.tls = k_tls;
        return true;
    }

    void admit(const Admission& admission) {
        Request head;
        if (!fill_head(m_head->get(), head)) {
            fail(400, "bad_request", "malformed percent-encoding in the request target");
            return;
        }
        m_state = State::admitting;
        auto state = std::make_shared<AdmitState>();
        state->gate = m_core->gate;
        state->session = weak_from_this();
        state->seq = ++m_admit_seq;
        try {
            admission(head, [state](std::optional<Response> refusal) { state->decide(std::move(refusal)); });
        } catch (const std::exception& e) {
            state->decide(json_error(500, "internal", std::string("the request failed: ") + e.what()));
        }
    }

    void on_admitted(std::uint64_t seq, std::optional<Response> refusal) {
        if (m_state != State::admitting || seq != m_admit_seq) {
            return;
        }
        if (refusal) {
            m_keep_alive = false; // the body stays unread
            write_response(std::move(*refusal));
            return;
        }
        begin_body();
    }

    // Moves the header into a parser for the route's body (memory or file) and reads the body.
    // A spooled body takes one of the upload slots here, after admission: a client without a
    // token never holds one.
    void begin_body() {
        if (m_match.options->body_to_file) {
            auto slot = m_core->take_file_slot();
            if (!slot) {
                Response busy = json_error(503, "busy", "too many uploads are in progress; retry in a few seconds");
                busy.headers.set("Retry-After", "5");
                m_keep_alive = false;
                write_response(std::move(busy));
                return;
            }
            std::error_code dir_ec;
            const auto dir = m_core->options.spool_dir.empty() ? std::filesystem::temp_directory_path(dir_ec)
                                                               : m_core->options.spool_dir;
            auto file = util::TempFile::create(dir, "gpupool-body-", ""); // unpredictable, 0600
            if (!file) {
                fail(500, "internal", file.error().message);
                return;
            }
            m_body_file = std::make_shared<BodyFile>(std::move(*file), std::move(slot));
            m_file_parser.emplace(std::move(*m_head));
            m_file_parser->body_limit(m_body_limit);
            error_code ec;
            m_file_parser->get().body().open(m_body_file->path().c_str(), beast::file_mode::write, ec);
            if (ec) {
                m_head.reset();
                fail(500, "internal", "cannot write the request body to disk: " + ec.message());
                return;
            }
        } else {
            m_parser.emplace(std::move(*m_head));
            m_parser->body_limit(m_body_limit);
        }
        m_head.reset();
        m_body_start = std::chrono::steady_clock::now();
        m_body_bytes = 0;
        if (m_expect_continue) {
            m_continue.emplace(http::status::continue_, m_version);
            lowest().expires_after(m_core->options.io_timeout);
            http::async_write(m_stream, *m_continue, [self = self()](const error_code& wec, std::size_t) {
                if (wec) {
                    self->close_now();
                    return;
                }
                self->read_body();
            });
            return;
        }
        read_body();
    }

    bool body_done() const { return m_file_parser ? m_file_parser->is_done() : m_parser->is_done(); }

    void read_body() {
        if (m_state == State::closed) {
            return;
        }
        m_state = State::reading_body;
        if (body_done()) {
            on_request();
            return;
        }
        // Each read must make progress within io_timeout, and the body as a whole must keep up
        // min_body_rate on average after body_grace: a trickle is cut off (the socket is closed).
        const auto& o = m_core->options;
        const auto rate = std::max<std::size_t>(o.min_body_rate, 1);
        const auto deadline = m_body_start + o.body_grace +
                              std::chrono::milliseconds(m_body_bytes * 1000 / rate);
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) {
            close_now();
            return;
        }
        lowest().expires_after(std::min<std::chrono::steady_clock::duration>(o.io_timeout, deadline - now));
        auto done = [self = self()](const error_code& ec, std::size_t n) { self->on_body(ec, n); };
        if (m_file_parser) {
            http::async_read_some(m_stream, m_buffer, *m_file_parser, std::move(done));
        } else {
            http::async_read_some(m_stream, m_buffer, *m_parser, std::move(done));
        }
    }

    void on_body(const error_code& ec, std::size_t n) {
        if (m_state == State::closed) {
            return;
        }
        m_body_bytes += n;
        if (ec == http::error::body_limit) {
            fail(413, "body_too_large", "the request body is larger than this endpoint accepts");
        } else if (ec && is_parse_error(ec)) {
            fail(400, "bad_request", "malformed HTTP request body: " + ec.message());
        } else if (ec) {
            close_now();
        } else {
            read_body();
        }
    }

    // A read that waits for the next request's first bytes (idle) and, while a handler holds the
    // Responder, notices a client that closes or resets the connection. Bytes it reads stay in
    // m_buffer for the next request.
    void start_raw_read() {
        if (m_raw_reading || m_state == State::closed) {
            return;
        }
        m_raw_reading = true;
        lowest().expires_never();
        m_stream.async_read_some(m_buffer.prepare(k_raw_read_bytes),
                                 [self = self()](const error_code& ec, std::size_t n) { self->on_raw_read(ec, n); });
    }

    void on_raw_read(const error_code& ec, std::size_t n) {
        m_raw_reading = false;
        if (m_state == State::closed) {
            return;
        }
        if (!ec) {
            m_buffer.commit(n);
        }
        switch (m_state) {
        case State::idle:
            if (ec) {
                close_now();
            } else {
                m_timer_generation++;
                m_timer.cancel();
                read_header();
            }
            break;
        case State::handling:
            if (ec) {
                close_now(); // the client went away while its request was pending
            }
            break;
        case State::writing:
            if (ec) {
                m_peer_closed = true; // finish the write, then close
            }
            break;
        case State::lingering:
            if (ec) {
                close_now();
            } else {
                m_buffer.consume(m_buffer.size());
                start_raw_read();
            }
            break;
        default: break;
        }
    }

    // ---- dispatching --------------------------------------------------------------------------

    void on_request() {
        m_state = State::handling;
        Request req;
        bool ok = false;
        if (m_file_parser) {
            ok = fill_head(m_file_parser->get(), req);
            m_file_parser->get().body().close();
            req.body_file = std::move(m_body_file);
        } else {
            ok = fill_head(m_parser->get(), req);
            req.body = std::move(m_parser->get().body());
        }
        if (!ok) {
            fail(400, "bad_request", "malformed percent-encoding in the request target");
            return;
        }
        m_link = std::make_shared<ClientLink>();
        req.client = m_link;
        const Handler* handler = m_match.handler;
        m_parser.reset();
        m_file_parser.reset();
        m_match = {};

        ++m_seq;
        auto state = std::make_shared<ReplyState>();
        state->gate = m_core->gate;
        state->session = weak_from_this();
        state->seq = m_seq;
        start_raw_read();
        try {
            (*handler)(std::move(req), [state](Response response) { state->answer(std::move(response), false); });
        } catch (const std::exception& e) {
            state->answer(json_error(500, "internal", std::string("the request failed: ") + e.what()), false);
        } catch (...) {
            state->answer(json_error(500, "internal", "the request failed"), false);
        }
    }

    void on_reply(std::uint64_t seq, Response response, bool dropped) {
        if (m_state != State::handling || seq != m_seq) {
            return; // closed, already answered by stop(), or stale
        }
        if (dropped) {
            response = m_core->stopping.load()
                           ? json_error(503, "shutting_down", "the server is shutting down; retry later")
                           : json_error(500, "no_response", "the server dropped this request without answering");
        }
        write_response(std::move(response));
    }

    // ---- writing ------------------------------------------------------------------------------

    // Answers a request that cannot be read further, then closes.
    void fail(int status, std::string_view error, const std::string& detail) {
        m_keep_alive = false;
        write_response(json_error(status, error, detail));
    }

    void write_response(Response response, bool force_close = false) {
        if (m_link) {
            m_link->finish();
            m_link.reset();
        }
        m_state = State::writing;
        int status = is_sane_status(response.status) ? response.status : 500;
        bool keep = m_keep_alive && !force_close && !m_core->stopping.load() && !m_peer_closed;
        const std::string* conn = response.headers.find("Connection");
        if (conn != nullptr && iequals(*conn, "close")) {
            keep = false;
        }
        m_keep_after_write = keep;

        m_response.emplace();
        auto& res = *m_response;
        res.version(m_version);
        res.result(static_cast<unsigned>(status));
        res.set(http::field::server, "gpupool/" GPUPOOL_VERSION);
        for (const auto& [name, value] : response.headers) {
            if (iequals(name, "Content-Length") || iequals(name, "Transfer-Encoding") || iequals(name, "Connection")) {
                continue;
            }
            res.insert(name, value);
        }
        if (status != 204 && status != 304) {
            if (!response.content_type.empty()) {
                res.set(http::field::content_type, response.content_type);
            }
            res.body() = std::move(response.body);
        }
        res.keep_alive(keep);
        res.prepare_payload();
        m_serializer.emplace(res);
        write_some();
    }

    void write_some() {
        lowest().expires_after(m_core->options.io_timeout); // stall timeout per write
        http::async_write_some(m_stream, *m_serializer,
                               [self = self()](const error_code& ec, std::size_t) { self->on_write(ec); });
    }

    void on_write(const error_code& ec) {
        if (m_state == State::closed) {
            return;
        }
        if (ec) {
            close_now();
            return;
        }
        if (!m_serializer->is_done()) {
            write_some();
            return;
        }
        m_serializer.reset();
        m_response.reset();
        if (!m_keep_after_write || m_peer_closed) {
            close_gracefully();
            return;
        }
        read_next();
    }

    // ---- closing ------------------------------------------------------------------------------

    void arm_timer(std::chrono::milliseconds after) {
        std::uint64_t generation = ++m_timer_generation;
        m_timer.expires_after(after);
        m_timer.async_wait([self = self(), generation](const error_code& ec) {
            if (!ec && generation == self->m_timer_generation) {
                self->close_now();
            }
        });
    }

    // Our last response is out: send FIN, then drain what the client still sends for a moment, so
    // that closing does not reset the connection before the client has read the response.
    void close_gracefully() {
        if (m_state == State::closed) {
            return;
        }
        m_state = State::lingering;
        error_code ignored;
        lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
        arm_timer(k_linger);
        if (!m_raw_reading) {
            m_buffer.consume(m_buffer.size());
            start_raw_read();
        }
    }

    void close_now() {
        if (m_state == State::closed) {
            return;
        }
        m_state = State::closed;
        m_timer_generation++;
        m_timer.cancel();
        if (m_link) {
            auto link = std::move(m_link);
            link->notify_gone();
        }
        error_code ignored;
        lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
        lowest().close();
        auto keep = self(); // remove() may drop the registry's reference
        m_core->remove(m_id);
    }

    void begin_stop() {
        switch (m_state) {
        case State::idle:
        case State::handshake: close_now(); break;
        case State::reading_header:
            if (m_buffer.size() == 0 && !m_head->got_some()) {
                close_now();
            }
            break;
        default: break; // finishes its request; the response says Connection: close
        }
    }

    void force_stop() {
        if (m_state == State::handling) {
            if (m_link) {
                auto link = std::move(m_link);
                link->notify_gone();
            }
            write_response(json_error(503, "shutting_down", "the server is shutting down; retry later"), true);
        } else if (m_state != State::writing && m_state != State::lingering) {
            close_now();
        }
    }

    std::shared_ptr<Core> m_core;
    std::uint64_t m_id;
    tcp::endpoint m_remote;
    Stream m_stream;
    asio::steady_timer m_timer;
    std::uint64_t m_timer_generation = 0;
    beast::flat_buffer m_buffer;
    std::optional<http::request_parser<http::empty_body>> m_head;       // until the header is in
    std::optional<http::request_parser<http::string_body>> m_parser;    // then the body in memory,
    std::optional<http::request_parser<http::file_body>> m_file_parser; // or spooled to m_body_file
    std::shared_ptr<BodyFile> m_body_file;
    std::size_t m_body_limit = 0;
    std::uint64_t m_body_bytes = 0;
    std::chrono::steady_clock::time_point m_body_start;
    bool m_expect_continue = false;
    std::uint64_t m_admit_seq = 0;
    Router::Match m_match;
    std::optional<http::response<http::empty_body>> m_continue;
    std::optional<http::response<http::string_body>> m_response;
    std::optional<http::response_serializer<http::string_body>> m_serializer;
    std::shared_ptr<ClientLink> m_link;
    State m_state = State::reading_header;
    unsigned m_version = 11;
    std::uint64_t m_seq = 0;
    bool m_keep_alive = true;
    bool m_keep_after_write = false;
    bool m_raw_reading = false;
    bool m_peer_closed = false;
};

using PlainSession = Session<beast::tcp_stream>;
using TlsSession = Session<beast::ssl_stream<beast::tcp_stream>>;

Error listen_error(const ServerOptions& o, const std::string& why) {
    return make_error(ErrorCode::io, "could not listen on " + o.host + ":" + std::to_string(o.port) + ": " + why);
}

} // namespace

struct HttpServer::Impl {
    std::shared_ptr<Core> core;
    std::optional<ssl::context> ssl_ctx; // declared before the io_context: sessions use it
    asio::io_context ioc;
    tcp::acceptor acceptor{asio::make_strand(ioc)};
    asio::steady_timer accept_timer{acceptor.get_executor()};
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
    std::vector<std::thread> threads;
    std::atomic<std::uint16_t> bound_port{0};

    std::mutex control_mutex; // start/stop
    bool started = false;
    bool stopped = false;
    std::atomic<bool> running{false};

    Impl(ServerOptions options, Router router)
        : core(std::make_shared<Core>(std::move(options), std::move(router))) {}

    Status load_tls() {
        const auto& o = core->options;
        try {
            ssl_ctx.emplace(ssl::context::tls_server);
            ssl_ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                                 ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                                 ssl::context::single_dh_use);
        } catch (const boost::system::system_error& e) {
            return make_error(ErrorCode::internal, std::string("could not set up TLS: ") + e.what());
        }
        try {
            ssl_ctx->use_certificate_chain_file(o.tls_cert_file);
        } catch (const boost::system::system_error& e) {
            return make_error(ErrorCode::invalid_input,
                              "could not load the TLS certificate '" + o.tls_cert_file + "': " + e.code().message());
        }
        try {
            ssl_ctx->use_private_key_file(o.tls_key_file, ssl::context::pem);
        } catch (const boost::system::system_error& e) {
            return make_error(ErrorCode::invalid_input, "could not load the TLS private key '" + o.tls_key_file +
                                                            "' (or it does not match the certificate): " +
                                                            e.code().message());
        }
        if (SSL_CTX_check_private_key(ssl_ctx->native_handle()) != 1) {
            return make_error(ErrorCode::invalid_input, "the TLS private key '" + o.tls_key_file +
                                                            "' does not match the certificate '" + o.tls_cert_file +
                                                            "'");
        }
        return {};
    }

    Status bind() {
        const auto& o = core->options;
        tcp::endpoint endpoint;
        error_code ec;
        auto address = asio::ip::make_address(o.host, ec);
        if (!ec) {
            endpoint = tcp::endpoint(address, o.port);
        } else {
            tcp::resolver resolver(ioc);
            auto results = resolver.resolve(o.host, std::to_string(o.port), tcp::resolver::passive, ec);
            if (ec || results.empty()) {
                return make_error(ErrorCode::invalid_input, "could not resolve the listen address '" + o.host +
                                                                "': " + (ec ? ec.message() : "no addresses"));
            }
            endpoint = results.begin()->endpoint();
        }
        try {
            acceptor.open(endpoint.protocol());
            acceptor.set_option(asio::socket_base::reuse_address(true));
            acceptor.bind(endpoint);
            acceptor.listen(asio::socket_base::max_listen_connections);
            bound_port = acceptor.local_endpoint().port();
        } catch (const boost::system::system_error& e) {
            error_code ignored;
            acceptor.close(ignored);
            return listen_error(o, e.code().message());
        }
        return {};
    }

    void do_accept() {
        acceptor.async_accept(asio::make_strand(ioc),
                              [this](const error_code& ec, tcp::socket socket) { on_accept(ec, std::move(socket)); });
    }

    void on_accept(const error_code& ec, tcp::socket socket) {
        if (!acceptor.is_open() || ec == asio::error::operation_aborted) {
            return;
        }
        if (ec) {
            // Out of descriptors or similar: back off instead of spinning.
            accept_timer.expires_after(k_accept_retry);
            accept_timer.async_wait([this](const error_code& wec) {
                if (!wec && acceptor.is_open()) {
                    do_accept();
                }
            });
            return;
        }
        error_code ignored;
        if (core->stopping.load() || core->session_count() >= core->options.max_connections) {
            socket.close(ignored);
            do_accept();
            return;
        }
        error_code rec;
        tcp::endpoint remote = socket.remote_endpoint(rec);
        if (rec) {
            socket.close(ignored);
            do_accept();
            return;
        }
        socket.set_option(tcp::no_delay(true), ignored);
        std::shared_ptr<SessionBase> session;
        {
            std::lock_guard lock(core->sessions_mutex);
            std::uint64_t id = core->next_id;
            if (!core->admit_client_locked(id, remote.address().to_string())) {
                socket.close(ignored); // this address has too many connections already
                do_accept();
                return;
            }
            ++core->next_id;
            if (ssl_ctx) {
                session = std::make_shared<TlsSession>(core, id, remote, std::move(socket), *ssl_ctx);
            } else {
                session = std::make_shared<PlainSession>(core, id, remote, std::move(socket));
            }
            core->sessions.emplace(id, session);
        }
        session->post_start();
        do_accept();
    }

    void run_thread() {
        while (true) {
            try {
                ioc.run();
                return;
            } catch (const std::exception&) {
                // A handler let an exception escape; keep serving.
            }
        }
    }

    Status start() {
        std::lock_guard lock(control_mutex);
        if (started) {
            return make_error(ErrorCode::conflict, "the HTTP server was already started");
        }
        const auto& o = core->options;
        if (o.threads == 0) {
            return make_error(ErrorCode::invalid_input, "the HTTP server needs at least one thread");
        }
        if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
            return make_error(ErrorCode::invalid_input, "TLS needs both a certificate and a private key file");
        }
        if (!o.tls_cert_file.empty()) {
            if (Status s = load_tls(); !s) {
                return s;
            }
        }
        if (Status s = bind(); !s) {
            return s;
        }
        started = true;
        running = true;
        work.emplace(ioc.get_executor());
        do_accept();
        for (unsigned i = 0; i < o.threads; ++i) {
            threads.emplace_back([this] { run_thread(); });
        }
        return {};
    }

    bool on_io_thread() const {
        auto me = std::this_thread::get_id();
        return std::any_of(threads.begin(), threads.end(), [&](const std::thread& t) { return t.get_id() == me; });
    }

    void stop() {
        std::lock_guard lock(control_mutex);
        if (!started || stopped) {
            return;
        }
        // An io thread cannot join itself: stop() belongs to the thread that owns the server.
        assert(!on_io_thread());
        stopped = true;
        core->stopping = true;
        asio::post(acceptor.get_executor(), [this] {
            error_code ignored;
            acceptor.close(ignored);
            accept_timer.cancel();
        });
        for (auto& s : core->snapshot()) {
            s->post_begin_stop();
        }
        auto now = std::chrono::steady_clock::now();
        if (!core->wait_empty(now + core->options.stop_grace)) {
            for (auto& s : core->snapshot()) {
                s->post_force_stop();
            }
            core->wait_empty(std::chrono::steady_clock::now() + k_force_grace);
        }
        work.reset();
        ioc.stop();
        for (auto& t : threads) {
            t.join();
        }
        threads.clear();
        core->gate->close();
        std::unordered_map<std::uint64_t, std::shared_ptr<SessionBase>> rest;
        {
            std::lock_guard slock(core->sessions_mutex);
            rest.swap(core->sessions);
        }
        rest.clear();
        running = false;
    }
};

HttpServer::HttpServer(ServerOptions options, Router router)
    : m_impl(std::make_unique<Impl>(std::move(options), std::move(router))) {}

HttpServer::~HttpServer() {
    m_impl->stop();
}

Status HttpServer::start() {
    return m_impl->start();
}

void HttpServer::stop() {
    m_impl->stop();
}

bool HttpServer::running() const {
    return m_impl->running.load();
}

std::uint16_t HttpServer::port() const {
    return m_impl->bound_port.load();
}

bool HttpServer::tls() const {
    return !m_impl->core->options.tls_cert_file.empty();
}

const Router& HttpServer::router() const {
    return m_impl->core->router;
}

const ServerOptions& HttpServer::options() const {
    return m_impl->core->options;
}

std::size_t HttpServer::connection_count() const {
    return m_impl->core->session_count();
}

} // namespace gpupool::net

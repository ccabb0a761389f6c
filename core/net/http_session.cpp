#include "core/net/http_session.hpp"

#include "core/net/request_head.hpp"
#include "core/net/url.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <limits>
#include <optional>

namespace gpupool::net::detail {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;

constexpr std::size_t k_raw_read_bytes = 4096;
constexpr std::size_t k_chunked_reserve_step = 64 * 1024; // a chunked body's share grows by this much
constexpr std::chrono::milliseconds k_linger{1000};       // drain time after our last response

template <class Stream>
class Session final : public SessionBase {
public:
    static constexpr bool k_tls = !std::is_same_v<Stream, beast::tcp_stream>;

    // `tls` is the TLS context the stream was made with (null for a plain session): the session
    // holds it, so a reload (HttpServer::reload_tls) never pulls it from under a connection.
    template <class... StreamArgs>
    Session(std::shared_ptr<Core> core, std::uint64_t id, tcp::endpoint remote, std::shared_ptr<ssl::context> tls,
            StreamArgs&&... args)
        : m_core(std::move(core)), m_id(id), m_remote(std::move(remote)), m_tls(std::move(tls)),
          m_stream(std::forward<StreamArgs>(args)...), m_timer(m_stream.get_executor()) {}

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
        m_reservation.reset();
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
        m_started = std::chrono::steady_clock::now();
        m_method.assign(msg.method_string().data(), msg.method_string().size());
        m_route.clear();
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
        if (m_match.kind == Router::Match::Kind::found) {
            m_route = m_match.pattern;
        }
        if (m_match.kind != Router::Match::Kind::found) {
            answer_unmatched(); // the body, if any, is never read
            return;
        }
        if (m_core->options.gate) {
            if (auto refusal = m_core->options.gate(method, parts.path)) {
                if (!m_head->is_done()) {
                    m_keep_alive = false; // its body is never read
                }
                write_response(std::move(*refusal));
                return;
            }
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
        Response r = unmatched_response(m_head->get(), m_match);
        if (r.status == 400 || !m_head->is_done()) {
            m_keep_alive = false;
        }
        write_response(std::move(r));
    }

    // The request line and headers as a Request (no body yet); false on bad percent-encoding.
    bool fill_head(const http::request_header<>& msg, Request& req) {
        return fill_request_head(msg, m_match, m_remote, k_tls, req);
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
    // A spooled body takes one of the upload slots here, and a body in memory its share of
    // max_body_memory, after admission: a client without a token never holds either.
    void begin_body() {
        if (m_match.options->body_to_file) {
            auto slot = m_core->take_file_slot();
            if (!slot) {
                answer_busy("too many uploads are in progress; retry in a few seconds");
                return;
            }
            // The server's own directory (claimed at start), 0600 and unpredictable names.
            auto file = util::TempFile::create(m_core->spool->path(), "gpupool-body-", "");
            if (!file) {
                fail(500, "internal", file.error().message);
                return;
            }
            m_body_file = std::make_shared<BodyFile>(std::move(*file), std::move(slot), m_core->spool);
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
            if (!reserve_memory()) {
                return;
            }
            m_parser.emplace(std::move(*m_head));
            m_parser->body_limit(m_body_limit);
        }
        m_head.reset();
        m_pace = BodyPace(m_core->options, std::chrono::steady_clock::now());
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

    // A body in memory reserves its Content-Length before a byte of it is read (a chunked one
    // starts with nothing and grows: grow_reservation); false when it was refused (and answered).
    bool reserve_memory() {
        if (m_head->is_done()) {
            return true; // no body
        }
        const auto length = m_head->content_length();
        const std::size_t want = length ? static_cast<std::size_t>(*length) : 0;
        if (const std::size_t cap = m_core->body_memory->cap_for(want); want > cap) {
            fail(413, "body_too_large",
                 "the request body has " + std::to_string(want) + " bytes; the server holds at most " +
                     std::to_string(cap) + " bytes of such request bodies in memory");
            return false;
        }
        m_reservation = m_core->reserve_body(want);
        if (!m_reservation) {
            answer_busy("the server holds as many request bodies in memory as it may; retry in a few seconds");
            return false;
        }
        return true;
    }

    // A chunked body's share follows what it has grown to; false when it was refused (and answered).
    bool grow_reservation() {
        if (!m_parser || !m_reservation) {
            return true;
        }
        const std::size_t have = m_parser->get().body().size();
        if (have <= m_reservation->bytes()) {
            return true;
        }
        const std::size_t step = (have + k_chunked_reserve_step - 1) / k_chunked_reserve_step * k_chunked_reserve_step;
        if (m_reservation->reserve(std::max(have, std::min(step, m_body_limit)))) {
            return true;
        }
        answer_busy("the server holds as many request bodies in memory as it may; retry in a few seconds");
        return false;
    }

    // 503 "busy" with Retry-After, then close (the body, if any, stays unread).
    void answer_busy(std::string_view detail) {
        Response busy = json_error(503, "busy", detail);
        busy.headers.set("Retry-After", "5");
        m_keep_alive = false;
        write_response(std::move(busy));
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
        // Each read must make progress within io_timeout, and the body must keep up min_body_rate
        // over the last body_rate_window after body_grace: a trickle is cut off (the socket is closed).
        const auto& o = m_core->options;
        const auto now = std::chrono::steady_clock::now();
        const auto deadline = m_pace.deadline(now);
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
        m_pace.add(std::chrono::steady_clock::now(), n);
        if (ec == http::error::body_limit) {
            fail(413, "body_too_large", "the request body is larger than this endpoint accepts");
        } else if (ec && is_parse_error(ec)) {
            fail(400, "bad_request", "malformed HTTP request body: " + ec.message());
        } else if (ec) {
            close_now();
        } else if (grow_reservation()) {
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
            req.body_hold = std::move(m_reservation); // the share follows the body
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
        if (m_core->options.observe && !m_method.empty()) {
            m_core->options.observe(
                Exchange{m_method, m_route, response.status, std::chrono::steady_clock::now() - m_started});
            m_method.clear();
        }
        if (m_link) {
            m_link->finish();
            m_link.reset();
        }
        m_state = State::writing;
        bool keep = m_keep_alive && !force_close && !m_core->stopping.load() && !m_peer_closed;
        const std::string* conn = response.headers.find("Connection");
        if (conn != nullptr && iequals(*conn, "close")) {
            keep = false;
        }
        m_keep_after_write = keep;

        m_response.emplace();
        if (response.body_file || response.body_fd) {
            // The body is a file, sent as it is read (a backup of the whole pool, a --dist file).
            http::file_body::value_type file;
            error_code ec;
            if (response.body_fd) {
                open_duplicate(*response.body_fd, file, ec);
            } else {
                file.open(response.body_file->path().c_str(), beast::file_mode::scan, ec);
            }
            if (!ec) {
                m_file_hold = std::move(response.body_file);
                response.body_fd.reset();
                response.body.clear();
                fill_beast_response(std::move(response), m_version, keep, *m_response);
                m_file_response.emplace(std::move(m_response->base()), std::move(file));
                m_file_response->prepare_payload();
                m_response.reset();
                m_file_serializer.emplace(*m_file_response);
                write_some();
                return;
            }
            response = json_error(500, "internal", "the response's file cannot be read: " + ec.message());
        }
        fill_beast_response(std::move(response), m_version, keep, *m_response);
        m_serializer.emplace(*m_response);
        write_some();
    }

    // A file body reading its own duplicate of `fd` (the Response's descriptor stays the caller's).
    static void open_duplicate(const util::UniqueFd& fd, http::file_body::value_type& body, error_code& ec) {
        const int dup = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0);
        if (dup < 0) {
            ec.assign(errno, boost::system::system_category());
            return;
        }
        beast::file f;
        f.native_handle(dup); // owned (closed) by the file body from here on
        body.reset(std::move(f), ec);
    }

    void write_some() {
        lowest().expires_after(m_core->options.io_timeout); // stall timeout per write
        auto done = [self = self()](const error_code& ec, std::size_t) { self->on_write(ec); };
        if (m_file_serializer) {
            http::async_write_some(m_stream, *m_file_serializer, std::move(done));
        } else {
            http::async_write_some(m_stream, *m_serializer, std::move(done));
        }
    }

    void on_write(const error_code& ec) {
        if (m_state == State::closed) {
            return;
        }
        if (ec) {
            close_now();
            return;
        }
        if (m_file_serializer ? !m_file_serializer->is_done() : !m_serializer->is_done()) {
            write_some();
            return;
        }
        m_serializer.reset();
        m_response.reset();
        m_file_serializer.reset();
        m_file_response.reset();
        m_file_hold.reset();
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
        m_reservation.reset();
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
    std::shared_ptr<ssl::context> m_tls; // before m_stream: outlives it
    Stream m_stream;
    asio::steady_timer m_timer;
    std::uint64_t m_timer_generation = 0;
    beast::flat_buffer m_buffer;
    std::optional<http::request_parser<http::empty_body>> m_head;       // until the header is in
    std::optional<http::request_parser<http::string_body>> m_parser;    // then the body in memory,
    std::optional<http::request_parser<http::file_body>> m_file_parser; // or spooled to m_body_file
    std::shared_ptr<BodyFile> m_body_file;
    std::size_t m_body_limit = 0;
    BodyPace m_pace;
    std::shared_ptr<BodyReservation> m_reservation; // the body's share of max_body_memory, until handed on
    bool m_expect_continue = false;
    std::uint64_t m_admit_seq = 0;
    Router::Match m_match;
    // The request being answered, for ServerOptions::observe (the method is cleared once observed).
    std::chrono::steady_clock::time_point m_started{};
    std::string m_method;
    std::string m_route;
    std::optional<http::response<http::empty_body>> m_continue;
    std::optional<http::response<http::string_body>> m_response;
    std::optional<http::response_serializer<http::string_body>> m_serializer;
    std::optional<http::response<http::file_body>> m_file_response; // or a response whose body is a file
    std::optional<http::response_serializer<http::file_body>> m_file_serializer;
    std::shared_ptr<const util::TempFile> m_file_hold; // removed once sent
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
#ifndef GPUPOOL_HTTP_PLAIN_ONLY
using TlsSession = Session<beast::ssl_stream<beast::tcp_stream>>;
#endif

} // namespace

std::shared_ptr<SessionBase> make_session(std::shared_ptr<Core> core, std::uint64_t id, tcp::endpoint remote,
                                          tcp::socket socket, std::shared_ptr<ssl::context> tls) {
#ifndef GPUPOOL_HTTP_PLAIN_ONLY
    if (tls != nullptr) {
        ssl::context& context = *tls;
        return std::make_shared<TlsSession>(std::move(core), id, std::move(remote), std::move(tls), std::move(socket),
                                            context);
    }
#else
    (void)tls; // never set: HttpServer::start refuses a certificate in this build
#endif
    return std::make_shared<PlainSession>(std::move(core), id, std::move(remote), nullptr, std::move(socket));
}

} // namespace gpupool::net::detail

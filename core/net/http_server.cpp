#include "core/net/http_server.hpp"

#include "core/net/http_session.hpp"
#include "core/net/server_core.hpp"
#include "core/util/thread_safety.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <exception>
#include <optional>
#include <thread>

// The server's lifecycle: TLS set-up, binding, the accept loop, the io threads, start and stop.
// Connections are http_session.cpp; what they share with the server is server_core.hpp.
namespace gpupool::net {

namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using detail::Core;

constexpr std::chrono::milliseconds k_force_grace{1000};  // stop(): after answering 503s
constexpr std::chrono::milliseconds k_accept_retry{100};  // accept failed (e.g. out of descriptors)

Error listen_error(const ServerOptions& o, const std::string& why) {
    return make_error(ErrorCode::io, "could not listen on " + o.host + ":" + std::to_string(o.port) + ": " + why);
}

// A server context holding the certificate chain and its private key, checked to match.
Result<std::shared_ptr<ssl::context>> make_tls_context(const std::string& cert_file, const std::string& key_file) {
    std::shared_ptr<ssl::context> context;
    try {
        context = std::make_shared<ssl::context>(ssl::context::tls_server);
        context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                             ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
    } catch (const boost::system::system_error& e) {
        return make_error(ErrorCode::internal, std::string("could not set up TLS: ") + e.what());
    }
    try {
        context->use_certificate_chain_file(cert_file);
    } catch (const boost::system::system_error& e) {
        return make_error(ErrorCode::invalid_input,
                          "could not load the TLS certificate '" + cert_file + "': " + e.code().message());
    }
    try {
        context->use_private_key_file(key_file, ssl::context::pem);
    } catch (const boost::system::system_error& e) {
        return make_error(ErrorCode::invalid_input,
                          "could not load the TLS private key '" + key_file +
                              "' (or it does not match the certificate): " + e.code().message());
    }
    if (SSL_CTX_check_private_key(context->native_handle()) != 1) {
        return make_error(ErrorCode::invalid_input,
                          "the TLS private key '" + key_file + "' does not match the certificate '" + cert_file + "'");
    }
    return context;
}

} // namespace

Status check_tls_files(const std::string& cert_file, const std::string& key_file) {
    auto made = make_tls_context(cert_file, key_file);
    if (!made) {
        return made.error();
    }
    return {};
}

struct HttpServer::Impl {
    std::shared_ptr<Core> core;
    util::Mutex tls_mutex; // ssl_ctx: swapped by reload_tls() while io threads accept
    std::shared_ptr<ssl::context> ssl_ctx GUARDED_BY(tls_mutex);
    asio::io_context ioc;
    tcp::acceptor acceptor{asio::make_strand(ioc)};
    asio::steady_timer accept_timer{acceptor.get_executor()};
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
    std::vector<std::thread> threads GUARDED_BY(control_mutex);
    std::atomic<std::uint16_t> bound_port{0};

    util::Mutex control_mutex; // start/stop
    bool started GUARDED_BY(control_mutex) = false;
    bool stopped GUARDED_BY(control_mutex) = false;
    std::atomic<bool> running{false};

    Impl(ServerOptions options, Router router)
        : core(std::make_shared<Core>(std::move(options), std::move(router))) {}

    // The context new connections get (null without TLS); each session keeps its own copy.
    std::shared_ptr<ssl::context> tls_context() EXCLUDES(tls_mutex) {
        util::MutexLock lock(tls_mutex);
        return ssl_ctx;
    }

    Status load_tls() EXCLUDES(tls_mutex) {
        auto made = make_tls_context(core->options.tls_cert_file, core->options.tls_key_file);
        if (!made) {
            return made.error();
        }
        util::MutexLock lock(tls_mutex);
        ssl_ctx = std::move(*made);
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
        auto session = core->add(remote.address().to_string(), [&](std::uint64_t id) {
            return make_session(core, id, remote, std::move(socket), tls_context());
        });
        if (!session) {
            socket.close(ignored); // this address has too many connections already
            do_accept();
            return;
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

    Status start() EXCLUDES(control_mutex) {
        util::MutexLock lock(control_mutex);
        if (started) {
            return make_error(ErrorCode::conflict, "the HTTP server was already started");
        }
        const auto& o = core->options;
        if (o.threads == 0) {
            return make_error(ErrorCode::invalid_input, "the HTTP server needs at least one thread");
        }
        if (o.max_body_memory == 0) {
            return make_error(ErrorCode::invalid_input, "the HTTP server needs some memory for request bodies");
        }
        if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
            return make_error(ErrorCode::invalid_input, "TLS needs both a certificate and a private key file");
        }
        if (!o.tls_cert_file.empty()) {
            if (!detail::k_tls_sessions) {
                return make_error(ErrorCode::invalid_input,
                                  "this build serves plain HTTP only (GPUPOOL_HTTP_PLAIN_ONLY, the fuzz build)");
            }
            if (Status s = load_tls(); !s) {
                return s;
            }
        }
        if (Status s = claim_spool(); !s) {
            return s;
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

    // The server's own directory for spooled bodies, after removing those of servers killed
    // mid-upload (util::ClaimedDir).
    Status claim_spool() REQUIRES(control_mutex) {
        const auto parent = core->options.spool_dir.empty() ? util::default_spool_parent() : core->options.spool_dir;
        std::size_t swept = 0;
        auto spool = util::ClaimedDir::claim(parent, &swept);
        if (!spool) {
            return make_error(spool.error().code,
                              "the HTTP server's spool for request bodies: " + spool.error().message);
        }
        if (swept > 0) {
            spdlog::info("removed {} spool director{} under {} left by servers that are gone (killed while "
                         "receiving a body)",
                         swept, swept == 1 ? "y" : "ies", parent.string());
        }
        core->spool = std::make_shared<const util::ClaimedDir>(std::move(*spool));
        return {};
    }

    bool on_io_thread() const REQUIRES(control_mutex) {
        auto me = std::this_thread::get_id();
        return std::any_of(threads.begin(), threads.end(), [&](const std::thread& t) { return t.get_id() == me; });
    }

    void stop() EXCLUDES(control_mutex) {
        util::MutexLock lock(control_mutex);
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
        core->take_all().clear();
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

Status HttpServer::reload_tls() {
    if (!tls()) {
        return make_error(ErrorCode::conflict, "this server serves plain HTTP: there is no certificate to reload");
    }
    if (!running()) {
        return make_error(ErrorCode::conflict, "the server is not running");
    }
    return m_impl->load_tls();
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

std::size_t HttpServer::body_bytes_reserved() const {
    return m_impl->core->body_memory->reserved.load();
}

} // namespace gpupool::net

// GET /metrics: the Prometheus text format (prometheus_metrics.hpp), for admin tokens and the
// scrape token on the API's listener, and for anyone who reaches the metrics listener (loopback).
#include "core/coordinator/service_impl.hpp"
#include "core/util/token_secret.hpp"

#include <openssl/crypto.h>

namespace gpupool::coordinator::service_detail {

namespace {

// The scrape token, compared as SHA-256 digests in constant time (no early exit on the first byte).
bool is_scrape_token(const ServiceState& s, const std::string& token) {
    const std::string& want = s.options.metrics_token_sha256;
    if (want.empty() || token.empty()) {
        return false;
    }
    const std::string got = util::sha256_hex(token);
    return got.size() == want.size() && CRYPTO_memcmp(got.data(), want.data(), got.size()) == 0;
}

net::Handler render_on_coordinator_thread(ServiceState& s) {
    return [&s](net::Request, net::Responder respond) {
        s.post_active(std::move(respond), [&s](net::Responder answer) { answer(s.metrics_response()); });
    };
}

} // namespace

net::Response ServiceState::metrics_response() const {
    net::Response r;
    r.content_type = k_prometheus_content_type;
    r.body = metrics->render(coord->metrics());
    r.headers.set("Cache-Control", "no-store");
    return r;
}

void add_metrics_routes(ServiceState& s, net::Router& r) {
    net::RouteOptions ro;
    ro.max_body_bytes = 0;
    ro.admit = [&s](const net::Request& head, net::Decide decide) {
        std::string token = bearer(head);
        if (is_scrape_token(s, token)) {
            decide(std::nullopt);
            return;
        }
        asio::post(s.ctx, [&s, token = std::move(token), decide = std::move(decide)] {
            decide(s.admission(token, {store::Role::admin}));
        });
    };
    r.add("GET", "/metrics", render_on_coordinator_thread(s), ro);
}

net::Router metrics_listener_routes(ServiceState& s) {
    net::Router r;
    r.add("GET", "/metrics", render_on_coordinator_thread(s), net::RouteOptions(0));
    return r;
}

} // namespace gpupool::coordinator::service_detail

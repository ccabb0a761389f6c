// The dashboard's routes: the page at `/` and its script and style sheet (embedded in the binary,
// dashboard.hpp), served to anyone since they hold no data, with headers that keep the page to
// its own files (no inline script, no other origin, no framing); and GET /v1/pool/samples, the
// pool's utilisation over the last day, which the page charts (members and admins, token checked).
#include "core/coordinator/dashboard.hpp"
#include "core/coordinator/service_impl.hpp"

#include <string_view>

namespace gpupool::coordinator::service_detail {

namespace {

// Everything the page may load comes from this coordinator; data: only for the empty favicon.
constexpr std::string_view k_content_security_policy =
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

std::string_view content_type_of(std::string_view name) {
    if (name.ends_with(".html")) {
        return "text/html; charset=utf-8";
    }
    if (name.ends_with(".js")) {
        return "text/javascript; charset=utf-8";
    }
    if (name.ends_with(".css")) {
        return "text/css; charset=utf-8";
    }
    return "application/octet-stream";
}

net::Response asset(std::string_view name) {
    for (const EmbeddedFile& f : dashboard_files()) {
        if (f.name == name) {
            net::Response r;
            r.content_type = std::string(content_type_of(name));
            r.body = std::string(f.bytes);
            r.headers.set("Cache-Control", "no-cache");
            r.headers.set("Content-Security-Policy", std::string(k_content_security_policy));
            r.headers.set("X-Content-Type-Options", "nosniff");
            r.headers.set("Referrer-Policy", "no-referrer");
            r.headers.set("X-Frame-Options", "DENY");
            return r;
        }
    }
    return net::json_error(404, "not_found", "no dashboard file `" + std::string(name) + "`");
}

// GET /v1/pool/samples?since=MS: the samples taken since then (at most the last day's).
net::Response pool_samples(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    std::int64_t since = 0;
    if (const std::string text = req.query_value("since"); !text.empty()) {
        auto v = parse_int(text, "since");
        if (!v || *v < 0) {
            return error_response(
                v ? make_error(ErrorCode::invalid_input, "expected a time in ms, not negative", "since") : v.error());
        }
        since = *v;
    }
    auto series = svc.coord->samples(who, since);
    if (!series) {
        return error_response(series.error());
    }
    const auto count = [&](std::int64_t n) { return series->job_counts ? json(n) : json(); };
    json out = json::array();
    for (const auto& x : series->samples) {
        out.push_back({{"at", x.at_ms},
                       {"workers_online", x.workers_online},
                       {"gpus_online", x.gpus_online},
                       {"gpu_milli_online", x.gpu_milli_online},
                       {"gpu_milli_allocated", x.gpu_milli_allocated},
                       {"jobs_queued", count(x.jobs_queued)},
                       {"jobs_running", count(x.jobs_running)}});
    }
    return ok({{"every_ms", series->every_ms}, {"samples", out}});
}

} // namespace

void add_dashboard_routes(ServiceState& s, net::Router& r) {
    for (const auto& [path, name] : {std::pair{"/", "index.html"}, std::pair{"/dashboard/app.js", "app.js"},
                                     std::pair{"/dashboard/style.css", "style.css"}}) {
        net::RouteOptions no_body; // nothing to read: the files are the same for everyone
        no_body.max_body_bytes = 0;
        r.add(
            "GET", path,
            [file = std::string_view(name)](net::Request, net::Responder respond) { respond(asset(file)); }, no_body);
    }
    s.on(r, "GET", "/v1/pool/samples", pool_samples, k_no_json_body);
}

} // namespace gpupool::coordinator::service_detail

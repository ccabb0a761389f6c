// The files for GPU owners (`coordinator --dist DIR`, dist.hpp), served to anyone since an owner has
// no token yet and they hold no secret: GET /dist/{name} (a static gpupool file or ca.pem, streamed
// from a descriptor opened beneath DIR), GET /dist/SHA256SUMS, GET /dist/install.sh (embedded), and
// GET /v1/dist, their description for `admin enroll` (names, sizes, SHA-256s, TLS). Without --dist
// the file routes answer 404 and /v1/dist says how to turn them on. They run on the io thread: a
// lookup, an open and an fstat, never a read of the file.
#include "core/coordinator/dist.hpp"
#include "core/coordinator/service_impl.hpp"
#include "core/util/sha256.hpp"

#include <string_view>

namespace gpupool::coordinator::service_detail {

namespace {

constexpr std::string_view k_enable_hint =
    "this coordinator serves no files for owners: start it with --dist DIR, DIR holding the static "
    "gpupool-VERSION-linux-ARCH file (make static, docs/static.md)";

net::Response text(std::string body, std::string content_type) {
    net::Response r;
    r.content_type = std::move(content_type);
    r.body = std::move(body);
    r.headers.set("Cache-Control", "no-cache");
    r.headers.set("X-Content-Type-Options", "nosniff");
    return r;
}

net::Response not_served(std::string_view why) {
    return net::json_error(404, "not_found", why);
}

net::Response dist_file(const std::shared_ptr<const DistFiles>& dist, const std::string& name) {
    if (!dist) {
        return not_served(k_enable_hint);
    }
    auto fd = dist->open_file(name);
    if (!fd) {
        return fd.error().code == ErrorCode::not_found ? not_served("no such file") : error_response(fd.error());
    }
    net::Response r = text({}, name == k_dist_ca_name ? "application/x-pem-file" : "application/octet-stream");
    r.body_fd = std::make_shared<const util::UniqueFd>(std::move(*fd));
    return r;
}

json describe(const ServiceOptions& o) {
    const bool tls = !o.http.tls_cert_file.empty();
    if (!o.dist) {
        return {{"enabled", false}, {"tls", tls}, {"detail", k_enable_hint}};
    }
    json files = json::array();
    json ca = nullptr;
    for (const auto& f : o.dist->files()) {
        const json entry = {{"name", f.name}, {"size", f.size}, {"sha256", f.sha256}, {"path", "/dist/" + f.name}};
        if (f.name == k_dist_ca_name) {
            ca = entry;
        } else {
            files.push_back(entry);
        }
    }
    return {{"enabled", true},
            {"tls", tls},
            {"files", files},
            {"ca", ca},
            {"sums", {{"path", "/dist/SHA256SUMS"}, {"sha256", util::sha256_hex(o.dist->sums())}}},
            {"install_script", {{"path", "/dist/install.sh"}, {"sha256", util::sha256_hex(install_script())}}}};
}

} // namespace

void add_dist_routes(ServiceState& s, net::Router& r) {
    net::RouteOptions no_body; // nothing to read: the same for everyone
    no_body.max_body_bytes = 0;
    const std::shared_ptr<const DistFiles> dist = s.options.dist;
    r.add(
        "GET", "/dist/{name}",
        [dist](net::Request req, net::Responder respond) { respond(dist_file(dist, req.param("name"))); }, no_body);
    r.add(
        "GET", "/dist/SHA256SUMS",
        [dist](net::Request, net::Responder respond) {
            respond(dist ? text(dist->sums(), "text/plain; charset=utf-8") : not_served(k_enable_hint));
        },
        no_body);
    // The script is in the binary: served with or without --dist (it says what it needs).
    r.add(
        "GET", "/dist/install.sh",
        [](net::Request, net::Responder respond) {
            respond(text(std::string(install_script()), "text/x-shellscript; charset=utf-8"));
        },
        no_body);
    r.add(
        "GET", "/v1/dist", [body = describe(s.options)](net::Request, net::Responder respond) { respond(ok(body)); },
        no_body);
}

} // namespace gpupool::coordinator::service_detail

#include "cmd/admin_enroll.hpp"

#include <string_view>
#include <vector>

namespace gpupool::cmd {

namespace {

using json = nlohmann::json;

constexpr std::string_view k_script = "gpupool-install.sh";

bool is_hex64(const json& v) {
    if (!v.is_string() || v.get_ref<const std::string&>().size() != 64) {
        return false;
    }
    for (char c : v.get_ref<const std::string&>()) {
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return false;
        }
    }
    return true;
}

// A name the command may carry unquoted: what DistFiles::is_dist_name serves, checked again here
// since it comes from the network.
bool is_plain_name(const std::string& name) {
    if (!name.starts_with("gpupool-") || name.find("-linux-") == std::string::npos) {
        return false;
    }
    for (char c : name) {
        const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
                        c == '-' || c == '_' || c == '+' || c == '~';
        if (!ok) {
            return false;
        }
    }
    return true;
}

// The URL as one shell word: single-quoted, with any quote in it escaped.
std::string shell_word(const std::string& text) {
    std::string out = "'";
    for (char c : text) {
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    }
    return out + "'";
}

// The served binary to pin: the first for `arch` (this machine's), else the last by name.
const json* pick_binary(const json& files, const std::string& arch) {
    const json* last = nullptr;
    for (const auto& f : files) {
        if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !is_hex64(f.value("sha256", json())) ||
            !is_plain_name(f["name"].get<std::string>())) {
            continue;
        }
        if (f["name"].get<std::string>().ends_with("-linux-" + arch)) {
            return &f;
        }
        last = &f;
    }
    return last;
}

} // namespace

JoinCommand join_command(const json& dist, const std::string& url, const std::string& admin_ca_sha256,
                         const std::string& arch) {
    if (!dist.is_object() || !dist.value("enabled", false)) {
        return {"", "No install command: the coordinator hands out no gpupool file. Start it with --dist DIR, DIR "
                    "holding the static file from `make static` (docs/static.md), and enroll again."};
    }
    const json files = dist.value("files", json::array()); // pick_binary points into it
    const json* binary = pick_binary(files, arch);
    const json script = dist.value("install_script", json::object());
    if (binary == nullptr || !script.is_object() || !is_hex64(script.value("sha256", json()))) {
        return {"", "No install command: the coordinator's --dist folder holds no gpupool-VERSION-linux-ARCH file: "
                    "copy the one `make static` wrote in dist/ there and restart the coordinator."};
    }
    const json ca = dist.value("ca", json());
    const bool ca_served = ca.is_object() && is_hex64(ca.value("sha256", json()));
    if (!admin_ca_sha256.empty() && (!ca_served || ca["sha256"] != admin_ca_sha256)) {
        return {"", std::string("No install command: this pool's certificate is signed by your own CA (--ca-cert), "
                                "which owners need too: copy that file into the coordinator's --dist folder as "
                                "ca.pem and restart it") +
                        (ca_served ? " (the ca.pem it serves is another file)." : ".")};
    }
    std::string base = url;
    while (!base.empty() && base.back() == '/') {
        base.pop_back();
    }
    const std::string u = shell_word(base);
    const std::string f = "\"$d/" + std::string(k_script) + "\"";
    // The script's own download: before any CA is trusted; the pinned SHA-256 is what counts.
    const std::string insecure_curl = ca_served ? "k" : "";
    const std::string insecure_wget = ca_served ? " --no-check-certificate" : "";
    std::string cmd = "d=$(mktemp -d) && { curl -fsSL" + insecure_curl + " -o " + f + " " + u +
                      "/dist/install.sh || wget -q" + insecure_wget + " -O " + f + " " + u +
                      "/dist/install.sh; } && { [ \"$(sha256sum " + f +
                      " | cut -d' ' -f1)\" = " + script["sha256"].get<std::string>() +
                      " ] || { echo 'install.sh does not match its pinned " +
                      "SHA-256: not run' >&2; false; }; } && sh " + f + " --url " + u + " --binary " +
                      (*binary)["name"].get<std::string>() + " --sha256 " + (*binary)["sha256"].get<std::string>();
    if (ca_served) {
        cmd += " --ca-sha256 " + ca["sha256"].get<std::string>();
    }
    std::string note;
    if (!base.starts_with("https://")) {
        note = "Caution: the pool is served over plain HTTP: the files are checked, but the worker's token "
               "crosses the network in clear.";
    }
    return {cmd, note};
}

} // namespace gpupool::cmd

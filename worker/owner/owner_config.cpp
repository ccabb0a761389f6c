#include "worker/owner/owner_config.hpp"

#include "core/net/url.hpp"
#include "core/resources/quantity.hpp"
#include "core/util/strings.hpp"
#include "worker/runtime/runtime_registry.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace gpupool::worker {

namespace fs = std::filesystem;

namespace {

using util::trim;

constexpr std::int64_t k_max_jobs = 1024;
constexpr std::int64_t k_max_gpu_index = 1023;
constexpr std::size_t k_max_list = 64;   // teams, registries (the wire's bound: api::k_max_owner_list)
constexpr std::size_t k_max_entry = 256; // one team name or registry prefix
constexpr std::size_t k_max_windows = 64;
constexpr std::size_t k_max_gpus = 64;
constexpr std::size_t k_max_file_bytes = 1 << 20;

// Every problem of one file, in the order found, as one Error (the rest in Error::more).
class Problems {
public:
    explicit Problems(std::string file) : m_file(std::move(file)) {}
    void add(const toml::source_region& where, std::string field, std::string message) {
        Error e = make_error(ErrorCode::invalid_input, std::move(message), std::move(field));
        e.where = SourcePos{m_file, where.begin.line, where.begin.column};
        m_errors.push_back(std::move(e));
    }
    void add(const toml::node& node, std::string field, std::string message) {
        add(node.source(), std::move(field), std::move(message));
    }
    bool empty() const { return m_errors.empty(); }
    Error take() {
        Error first = std::move(m_errors.front());
        for (std::size_t i = 1; i < m_errors.size(); ++i) {
            first.more.push_back(std::move(m_errors[i]));
        }
        return first;
    }

private:
    std::string m_file;
    std::vector<Error> m_errors;
};

std::string type_of(const toml::node& n) {
    switch (n.type()) {
    case toml::node_type::string:
        return "a string";
    case toml::node_type::integer:
        return "an integer";
    case toml::node_type::floating_point:
        return "a number";
    case toml::node_type::boolean:
        return "true or false";
    case toml::node_type::array:
        return "an array";
    case toml::node_type::table:
        return "a table";
    default:
        return "a date or time";
    }
}

void check_keys(const toml::table& t, const std::vector<std::string>& known, const std::string& prefix, Problems& p) {
    for (auto&& [key, value] : t) {
        const std::string k(key.str());
        if (std::find(known.begin(), known.end(), k) != known.end()) {
            continue;
        }
        std::string msg = "unknown key `" + k + "` " + (prefix.empty() ? "at the top level" : "in [" + prefix + "]");
        if (auto s = util::nearest(k, known)) {
            msg += "; did you mean `" + *s + "`?";
        } else {
            msg += "; valid keys are " + util::join(known, ", ");
        }
        p.add(key.source().begin.line > 0 ? key.source() : value.source(), (prefix.empty() ? "" : prefix + ".") + k,
              std::move(msg));
    }
}

std::optional<std::string> get_string(const toml::node& n, const std::string& field, Problems& p) {
    const auto* s = n.as_string();
    if (s == nullptr) {
        p.add(n, field, "expected a string, got " + type_of(n));
        return std::nullopt;
    }
    const std::string& v = s->get();
    if (v.empty() || v.find('\0') != std::string::npos || v.size() > 4096) {
        p.add(n, field, "expected a non-empty string of at most 4096 bytes without NUL");
        return std::nullopt;
    }
    return v;
}

std::optional<std::int64_t> get_integer(const toml::node& n, const std::string& field, Problems& p, std::int64_t lo,
                                        std::int64_t hi) {
    const auto* i = n.as_integer();
    if (i == nullptr) {
        p.add(n, field, "expected an integer, got " + type_of(n));
        return std::nullopt;
    }
    if (i->get() < lo || i->get() > hi) {
        p.add(n, field,
              "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got " +
                  std::to_string(i->get()));
        return std::nullopt;
    }
    return i->get();
}

std::optional<bool> get_bool(const toml::node& n, const std::string& field, Problems& p) {
    const auto* b = n.as_boolean();
    if (b == nullptr) {
        p.add(n, field, "expected true or false, got " + type_of(n));
        return std::nullopt;
    }
    return b->get();
}

// A quantity written as text with a unit ("12h", "32GiB") or, for CPUs, a number ("8", 2.5).
template <class Parse>
std::optional<std::int64_t> get_quantity(const toml::node& n, const std::string& field, Problems& p, Parse parse,
                                         const char* example, bool allow_zero = false) {
    std::optional<std::string> text;
    if (const auto* s = n.as_string()) {
        text = s->get();
    } else if (const auto* i = n.as_integer()) {
        text = std::to_string(i->get());
    } else if (const auto* f = n.as_floating_point()) {
        std::ostringstream os;
        os << f->get();
        text = os.str();
    }
    if (!text) {
        p.add(n, field, std::string("expected a quantity such as ") + example + ", got " + type_of(n));
        return std::nullopt;
    }
    auto v = parse(*text);
    if (!v) {
        p.add(n, field, v.error().message);
        return std::nullopt;
    }
    if (*v < 0 || (*v == 0 && !allow_zero)) {
        p.add(n, field, "expected more than zero");
        return std::nullopt;
    }
    return *v;
}

std::optional<std::vector<std::string>> get_names(const toml::node& n, const std::string& field, Problems& p,
                                                  bool registry) {
    const auto* a = n.as_array();
    if (a == nullptr) {
        p.add(n, field, "expected an array of strings, got " + type_of(n));
        return std::nullopt;
    }
    if (a->empty() || a->size() > k_max_list) {
        p.add(n, field, "expected 1 to " + std::to_string(k_max_list) + " entries (leave the key out to allow all)");
        return std::nullopt;
    }
    std::vector<std::string> out;
    for (std::size_t i = 0; i < a->size(); ++i) {
        const std::string at = field + "[" + std::to_string(i) + "]";
        auto s = get_string(*a->get(i), at, p);
        if (!s) {
            continue;
        }
        const bool bad = s->size() > k_max_entry ||
                         std::any_of(s->begin(), s->end(), [](unsigned char c) { return c <= ' ' || c >= 0x7f; });
        if (bad) {
            p.add(*a->get(i), at,
                  "expected at most " + std::to_string(k_max_entry) + " printable characters without blanks");
            continue;
        }
        if (registry && s->back() != '/') {
            *s += '/'; // a prefix matches whole components: "ghcr.io" must not match "ghcr.io.evil.example"
        }
        out.push_back(*s);
    }
    return out;
}

constexpr std::array<const char*, 7> k_day_names{"sun", "mon", "tue", "wed", "thu", "fri", "sat"};
constexpr std::array<const char*, 7> k_day_words{"sunday",   "monday", "tuesday", "wednesday",
                                                 "thursday", "friday", "saturday"};

std::string clock_text(int minute) {
    const auto two = [](int n) { return std::string(n < 10 ? "0" : "") + std::to_string(n); };
    return two(minute / 60) + ":" + two(minute % 60);
}

std::optional<int> day_number(std::string_view word) {
    for (int d = 0; d < 7; ++d) {
        if (word == k_day_names[static_cast<std::size_t>(d)] || word == k_day_words[static_cast<std::size_t>(d)]) {
            return d;
        }
    }
    return std::nullopt;
}

void parse_window(const toml::table& t, const std::string& field, Problems& p, std::vector<ShareWindow>& out) {
    check_keys(t, {"days", "from", "to", "all_day"}, field, p);
    ShareWindow w;
    w.line = t.source().begin.line;
    bool ok = true;
    if (const auto* n = t.get("days")) {
        if (auto s = get_string(*n, field + ".days", p)) {
            auto days = parse_days(*s);
            if (!days) {
                p.add(*n, field + ".days", days.error().message);
                ok = false;
            } else {
                w.days = *days;
            }
        } else {
            ok = false;
        }
    } else {
        w.days = 0x7f; // every day
    }
    if (const auto* n = t.get("all_day")) {
        auto b = get_bool(*n, field + ".all_day", p);
        ok = ok && b.has_value();
        w.all_day = b.value_or(false);
    }
    const toml::node* from = t.get("from");
    const toml::node* to = t.get("to");
    if (w.all_day && (from != nullptr || to != nullptr)) {
        p.add(from != nullptr ? *from : *to, field + (from != nullptr ? ".from" : ".to"),
              "an all_day window has no `from` or `to`");
        return;
    }
    if (!w.all_day) {
        if (from == nullptr || to == nullptr) {
            p.add(t, field, "a window needs `from` and `to` (\"19:00\", \"08:00\") or all_day = true");
            return;
        }
        for (auto [node, key, allow_24, slot] :
             {std::tuple{from, ".from", false, &w.from_min}, std::tuple{to, ".to", true, &w.to_min}}) {
            auto s = get_string(*node, field + key, p);
            if (!s) {
                ok = false;
                continue;
            }
            auto m = parse_clock_time(*s, allow_24);
            if (!m) {
                p.add(*node, field + key, m.error().message);
                ok = false;
                continue;
            }
            *slot = *m;
        }
        if (ok && w.from_min == w.to_min) {
            p.add(*to, field + ".to", "`from` and `to` are the same time: for a whole day write all_day = true");
            ok = false;
        }
    }
    if (ok) {
        out.push_back(w);
    }
}

void parse_share(const toml::table& t, Problems& p, ShareSettings& s) {
    check_keys(t, {"max_jobs", "max_runtime", "cpus", "memory", "teams", "registries", "drain_grace", "window"},
               "share", p);
    if (const auto* n = t.get("max_jobs")) {
        if (auto v = get_integer(*n, "share.max_jobs", p, 0, k_max_jobs)) {
            s.max_jobs = static_cast<int>(*v);
        }
    }
    if (const auto* n = t.get("max_runtime")) {
        s.max_runtime_s = get_quantity(*n, "share.max_runtime", p, resources::parse_duration_s, "\"12h\"");
    }
    if (const auto* n = t.get("drain_grace")) {
        s.drain_grace_s = get_quantity(*n, "share.drain_grace", p, resources::parse_duration_s, "\"5m\"", true);
    }
    if (const auto* n = t.get("cpus")) {
        s.cpu_milli = get_quantity(*n, "share.cpus", p, resources::parse_milli, "8 or \"2.5\"");
    }
    if (const auto* n = t.get("memory")) {
        s.memory_mib = get_quantity(*n, "share.memory", p, resources::parse_memory_mib, "\"32GiB\"");
    }
    if (const auto* n = t.get("teams")) {
        s.teams = get_names(*n, "share.teams", p, false);
    }
    if (const auto* n = t.get("registries")) {
        s.registries = get_names(*n, "share.registries", p, true);
    }
    if (const auto* n = t.get("window")) {
        const auto* a = n->as_array();
        if (a == nullptr || !a->is_array_of_tables() || a->size() > k_max_windows) {
            p.add(*n, "share.window",
                  "expected up to " + std::to_string(k_max_windows) + " [[share.window]] tables, got " + type_of(*n));
            return;
        }
        std::vector<ShareWindow> windows;
        for (std::size_t i = 0; i < a->size(); ++i) {
            parse_window(*a->get(i)->as_table(), "share.window[" + std::to_string(i) + "]", p, windows);
        }
        s.windows = std::move(windows);
    }
}

void parse_gpus(const toml::node& n, Problems& p, ShareSettings& s) {
    const auto* a = n.as_array();
    if (a == nullptr || !a->is_array_of_tables() || a->size() > k_max_gpus) {
        p.add(n, "gpu", "expected up to " + std::to_string(k_max_gpus) + " [[gpu]] tables, got " + type_of(n));
        return;
    }
    std::set<std::int64_t> seen;
    for (std::size_t i = 0; i < a->size(); ++i) {
        const auto& t = *a->get(i)->as_table();
        const std::string field = "gpu[" + std::to_string(i) + "]";
        check_keys(t, {"index", "share", "keep_mib"}, field, p);
        GpuTerms g;
        const auto* idx = t.get("index");
        if (idx == nullptr) {
            p.add(t, field + ".index", "missing required key `index` (the GPU's index as nvidia-smi shows it)");
            continue;
        }
        auto index = get_integer(*idx, field + ".index", p, 0, k_max_gpu_index);
        if (!index) {
            continue;
        }
        if (!seen.insert(*index).second) {
            p.add(*idx, field + ".index",
                  "GPU " + std::to_string(*index) + " is already described by an earlier [[gpu]]");
            continue;
        }
        g.index = *index;
        if (const auto* sh = t.get("share")) {
            g.share = get_bool(*sh, field + ".share", p).value_or(true);
        }
        if (const auto* k = t.get("keep_mib")) {
            g.keep_mib = get_integer(*k, field + ".keep_mib", p, 0, resources::k_max_memory_mib).value_or(0);
        }
        s.gpus.push_back(g);
    }
}

void parse_pool(const toml::table& t, Problems& p, PoolSettings& pool) {
    check_keys(
        t,
        {"coordinator", "token_file", "ca_cert", "name", "work_dir", "cache_dir", "runtime", "unsafe_process_runtime",
         "mps", "mps_compute", "model_cache_max", "hf_token_file", "hf_endpoint"},
        "pool", p);
    for (auto [key, slot] : {std::pair{"coordinator", &pool.coordinator}, std::pair{"token_file", &pool.token_file},
                             std::pair{"ca_cert", &pool.ca_cert}, std::pair{"name", &pool.name},
                             std::pair{"work_dir", &pool.work_dir}, std::pair{"cache_dir", &pool.cache_dir},
                             std::pair{"hf_token_file", &pool.hf_token_file}, std::pair{"hf_endpoint", &pool.hf_endpoint}}) {
        if (const auto* n = t.get(key)) {
            *slot = get_string(*n, std::string("pool.") + key, p);
        }
    }
    if (pool.coordinator && !net::is_http_url_list(*pool.coordinator)) {
        p.add(*t.get("coordinator"), "pool.coordinator",
              "expected an http:// or https:// URL (or several, comma-separated, for standby coordinators)");
    }
    if (const auto* n = t.get("runtime")) {
        auto s = get_string(*n, "pool.runtime", p);
        const auto names = runtime_names();
        if (s && std::find(names.begin(), names.end(), *s) == names.end()) {
            p.add(*n, "pool.runtime", "expected one of " + util::join(names, ", ") + ", got `" + *s + "`");
        } else {
            pool.runtime = s;
        }
    }
    if (const auto* n = t.get("unsafe_process_runtime")) {
        pool.unsafe_process_runtime = get_bool(*n, "pool.unsafe_process_runtime", p);
    }
    if (const auto* n = t.get("mps")) {
        pool.mps = get_bool(*n, "pool.mps", p);
    }
    if (const auto* n = t.get("mps_compute")) {
        if (auto s = get_string(*n, "pool.mps_compute", p)) {
            if (auto c = parse_mps_compute(*s)) {
                pool.mps_compute = *c;
            } else {
                p.add(*n, "pool.mps_compute", c.error().message);
            }
        }
    }
    if (pool.hf_endpoint && (!net::is_http_url_list(*pool.hf_endpoint) || pool.hf_endpoint->find(',') != std::string::npos)) {
        p.add(*t.get("hf_endpoint"), "pool.hf_endpoint", "expected an http:// or https:// URL");
    }
    if (const auto* n = t.get("model_cache_max")) {
        if (auto s = get_string(*n, "pool.model_cache_max", p)) {
            if (auto mib = resources::parse_memory_mib(*s); mib && *mib > 0) {
                pool.model_cache_max_mib = *mib;
            } else {
                p.add(*n, "pool.model_cache_max", "expected a size like \"200GiB\", got `" + *s + "`");
            }
        }
    }
}

} // namespace

Result<std::uint8_t> parse_days(std::string_view text) {
    std::uint8_t bits = 0;
    const std::string lower = [&] {
        std::string s(text);
        std::transform(s.begin(), s.end(), s.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        return s;
    }();
    std::string_view rest = lower;
    const auto bad = [&](std::string_view item) {
        return make_error(ErrorCode::invalid_input,
                          "expected days such as \"mon-fri\", \"sat,sun\", \"all\", \"weekdays\" or \"weekends\"; `" +
                              std::string(item) + "` is not a day");
    };
    while (true) {
        const auto comma = rest.find(',');
        const std::string_view item = trim(rest.substr(0, comma));
        if (item == "all" || item == "daily") {
            bits |= 0x7f;
        } else if (item == "weekdays") {
            bits |= 0x3e;
        } else if (item == "weekends") {
            bits |= 0x41;
        } else {
            const auto dash = item.find('-');
            const auto first = day_number(trim(item.substr(0, dash)));
            const auto last = dash == std::string_view::npos ? first : day_number(trim(item.substr(dash + 1)));
            if (!first || !last) {
                return bad(item);
            }
            for (int d = *first;; d = (d + 1) % 7) { // "fri-mon" wraps through the weekend
                bits |= static_cast<std::uint8_t>(1u << d);
                if (d == *last) {
                    break;
                }
            }
        }
        if (comma == std::string_view::npos) {
            break;
        }
        rest.remove_prefix(comma + 1);
    }
    return bits;
}

Result<int> parse_clock_time(std::string_view text, bool allow_24) {
    const auto bad = make_error(ErrorCode::invalid_input, std::string("expected a time of day as HH:MM (\"19:00\"") +
                                                              (allow_24 ? ", up to \"24:00\")" : ")") + ", got `" +
                                                              std::string(text) + "`");
    const auto colon = text.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon > 2 || text.size() != colon + 3) {
        return bad;
    }
    int h = -1;
    int m = -1;
    const auto rh = std::from_chars(text.data(), text.data() + colon, h);
    const auto rm = std::from_chars(text.data() + colon + 1, text.data() + text.size(), m);
    if (rh.ec != std::errc() || rh.ptr != text.data() + colon || rm.ec != std::errc() ||
        rm.ptr != text.data() + text.size() || m < 0 || m > 59 || h < 0 || h > 24 ||
        (h == 24 && (m != 0 || !allow_24))) {
        return bad;
    }
    return h * 60 + m;
}

Result<OwnerConfig> parse_owner_config(std::string_view text, const std::string& file) {
    toml::table root;
    try {
        root = toml::parse(text, file);
    } catch (const toml::parse_error& e) {
        Error err = make_error(ErrorCode::invalid_input, "TOML syntax error: " + std::string(e.description()));
        err.where = SourcePos{file, e.source().begin.line, e.source().begin.column};
        return err;
    }
    Problems p(file);
    OwnerConfig c;
    c.file = file;
    check_keys(root, {"pool", "share", "gpu"}, "", p);
    for (auto [key, where] : {std::pair{"pool", 0}, std::pair{"share", 1}}) {
        const toml::node* n = root.get(key);
        if (n == nullptr) {
            continue;
        }
        if (!n->is_table()) {
            p.add(*n, key, std::string("expected a table [") + key + "], got " + type_of(*n));
        } else if (where == 0) {
            parse_pool(*n->as_table(), p, c.pool);
        } else {
            parse_share(*n->as_table(), p, c.share);
        }
    }
    if (const auto* g = root.get("gpu")) {
        parse_gpus(*g, p, c.share);
    }
    if (!p.empty()) {
        return p.take();
    }
    return c;
}

Result<OwnerConfig> load_owner_config(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::error_code ec;
        return make_error(ErrorCode::not_found,
                          "worker config `" + path.string() + "` " +
                              (fs::exists(path, ec) ? "cannot be read" : "does not exist"),
                          "--config");
    }
    std::string text(k_max_file_bytes + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(in.gcount()));
    if (text.size() > k_max_file_bytes) {
        return make_error(ErrorCode::invalid_input, "worker config `" + path.string() + "` is over 1 MiB", "--config");
    }
    return parse_owner_config(text, path.string());
}

fs::path default_owner_config_path() {
    if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg != nullptr && *xdg != '\0') {
        return fs::path(xdg) / "gpupool" / "worker.toml";
    }
    const char* home = std::getenv("HOME");
    return fs::path(home != nullptr ? home : ".") / ".config" / "gpupool" / "worker.toml";
}

ShareSettings merge(const ShareSettings& top, const ShareSettings& base) {
    ShareSettings s;
    s.max_jobs = top.max_jobs ? top.max_jobs : base.max_jobs;
    s.max_runtime_s = top.max_runtime_s ? top.max_runtime_s : base.max_runtime_s;
    s.cpu_milli = top.cpu_milli ? top.cpu_milli : base.cpu_milli;
    s.memory_mib = top.memory_mib ? top.memory_mib : base.memory_mib;
    s.teams = top.teams ? top.teams : base.teams;
    s.registries = top.registries ? top.registries : base.registries;
    s.drain_grace_s = top.drain_grace_s ? top.drain_grace_s : base.drain_grace_s;
    s.windows = top.windows ? top.windows : base.windows;
    s.gpus = top.gpus.empty() ? base.gpus : top.gpus;
    return s;
}

std::string window_text(const ShareWindow& w) {
    std::string days;
    if ((w.days & 0x7fU) == 0x7fU) {
        days = "every day";
    } else {
        for (int i = 1; i <= 7; ++i) { // Monday first
            const int d = i % 7;
            if ((w.days & (1U << static_cast<unsigned>(d))) != 0) {
                days += (days.empty() ? "" : ",") + std::string(k_day_names[static_cast<std::size_t>(d)]);
            }
        }
    }
    return days + " " + (w.all_day ? std::string("all day") : clock_text(w.from_min) + "-" + clock_text(w.to_min));
}

} // namespace gpupool::worker

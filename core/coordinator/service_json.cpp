// CoordinatorService's requests and responses: bodies parsed within limits, fields read without
// silent conversions, errors as JSON with the HTTP status of their code.
#include "core/coordinator/service_impl.hpp"

#include "core/recipe/recipe_json.hpp"
#include "core/util/strings.hpp"

#include <spdlog/spdlog.h>

#include <charconv>

namespace gpupool::coordinator {

using json = nlohmann::json;

int http_status(ErrorCode code) { return net::http_status_for(code); }

namespace {

// One pass over the text before anything is built. It counts nesting and stops at the first level
// too deep (8 MiB of `[` costs a scan, not a tree of millions of arrays), and counts the items of
// the object's "jobs" array and stops at the first one past `max_jobs` (a million `{}` cost a scan
// up to the cap, not a million objects).
class BodyScan : public nlohmann::json_sax<json> {
public:
    BodyScan(std::size_t max_depth, std::size_t max_jobs) : m_max(max_depth), m_max_jobs(max_jobs) {}
    bool null() override { return item(); }
    bool boolean(bool) override { return item(); }
    bool number_integer(number_integer_t) override { return item(); }
    bool number_unsigned(number_unsigned_t) override { return item(); }
    bool number_float(number_float_t, const string_t&) override { return item(); }
    bool string(string_t&) override { return item(); }
    bool binary(binary_t&) override { return item(); }
    bool start_object(std::size_t) override { return item() && ++m_depth <= m_max; }
    bool key(string_t& k) override {
        if (m_depth == 1) {
            m_jobs_key = k == "jobs"; // the top-level object's member that comes next
        }
        return true;
    }
    bool end_object() override { return --m_depth, true; }
    bool start_array(std::size_t) override {
        if (!item()) {
            return false;
        }
        ++m_depth;
        if (m_depth == 2 && m_jobs_key) {
            m_in_jobs = true;
            m_jobs = 0;
        }
        return m_depth <= m_max;
    }
    bool end_array() override {
        if (m_depth == 2) {
            m_in_jobs = false;
        }
        return --m_depth, true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
        m_syntax_error = true;
        return false;
    }
    bool too_deep() const { return m_depth > m_max; }
    bool too_many_jobs() const { return m_too_many_jobs; }
    bool syntax_error() const { return m_syntax_error; }

private:
    // Every value: one more job when it is an item of the top-level "jobs" array.
    bool item() {
        if (m_in_jobs && m_depth == 2 && m_max_jobs != 0 && ++m_jobs > m_max_jobs) {
            m_too_many_jobs = true;
            return false;
        }
        return true;
    }

    std::size_t m_max;
    std::size_t m_max_jobs;
    std::size_t m_depth = 0;
    bool m_jobs_key = false;
    bool m_in_jobs = false;
    std::size_t m_jobs = 0;
    bool m_too_many_jobs = false;
    bool m_syntax_error = false;
};

} // namespace

Result<json> parse_json_object(std::string_view text, std::size_t max_depth, std::size_t max_jobs) {
    if (text.empty()) {
        return Result<json>(boost::system::in_place_value, json::object());
    }
    BodyScan scan(max_depth, max_jobs);
    if (!json::sax_parse(text, &scan)) {
        if (scan.too_many_jobs()) {
            return make_error(ErrorCode::invalid_input,
                              "a request has at most " + std::to_string(max_jobs) + " jobs; this one has more", "jobs");
        }
        if (scan.too_deep()) {
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

namespace service_detail {

net::Response error_response(const Error& e) {
    if (http_status(e.code) >= 500) {
        spdlog::error("{}", util::escape_control(e.message)); // the operators' business, not the caller's only
    }
    return net::json_error(http_status(e.code), to_string(e.code), e.message, e.field);
}

json assignments_json(const std::vector<Assignment>& list, const std::set<AttemptId>& known) {
    json arr = json::array();
    for (const auto& a : list) {
        if (known.count(a.attempt) == 0) {
            arr.push_back(api::to_json(a));
        }
    }
    return arr;
}

net::Response ok(const json& body, int status) { return net::json_response(status, body.dump()); }

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

Result<std::int64_t> parse_int(const std::string& text, const std::string& field) {
    std::int64_t v = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
        return make_error(ErrorCode::invalid_input, "expected an integer, got `" + text + "`", field);
    }
    return v;
}

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

json opt_json(const std::optional<std::int64_t>& v) { return v ? json(*v) : json(); }

} // namespace service_detail

} // namespace gpupool::coordinator

#include "core/net/http_types.hpp"

#include <boost/beast/http/status.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

namespace gpupool::net {

namespace {
char lower(char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}
} // namespace

std::uint64_t BodyFile::size() const {
    std::error_code ec;
    const auto n = std::filesystem::file_size(path(), ec);
    return ec ? 0 : static_cast<std::uint64_t>(n);
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

void Headers::add(std::string name, std::string value) {
    m_fields.emplace_back(std::move(name), std::move(value));
}

void Headers::set(std::string name, std::string value) {
    std::erase_if(m_fields, [&](const Field& f) { return iequals(f.first, name); });
    m_fields.emplace_back(std::move(name), std::move(value));
}

const std::string* Headers::find(std::string_view name) const {
    for (const auto& [key, value] : m_fields) {
        if (iequals(key, name)) {
            return &value;
        }
    }
    return nullptr;
}

std::string Headers::get(std::string_view name, std::string_view fallback) const {
    const std::string* v = find(name);
    return v != nullptr ? *v : std::string(fallback);
}

bool ClientLink::gone() const {
    util::MutexLock lock(m_mutex);
    return m_gone;
}

void ClientLink::on_gone(std::function<void()> callback) {
    {
        util::MutexLock lock(m_mutex);
        if (m_finished) {
            return;
        }
        if (!m_gone) {
            m_callbacks.push_back(std::move(callback));
            return;
        }
    }
    callback();
}

void ClientLink::notify_gone() {
    std::vector<std::function<void()>> callbacks;
    {
        util::MutexLock lock(m_mutex);
        if (m_gone || m_finished) {
            m_gone = true;
            return;
        }
        m_gone = true;
        callbacks.swap(m_callbacks);
    }
    for (auto& cb : callbacks) {
        cb();
    }
}

void ClientLink::finish() {
    std::vector<std::function<void()>> dropped;
    util::MutexLock lock(m_mutex);
    m_finished = true;
    dropped.swap(m_callbacks);
}

std::string Request::param(const std::string& name) const {
    auto it = path_params.find(name);
    return it != path_params.end() ? it->second : std::string();
}

std::string Request::query_value(const std::string& name) const {
    auto it = query.find(name);
    return it != query.end() ? it->second : std::string();
}

namespace {

struct StatusRow {
    ErrorCode code;
    int status;
};
// Read both ways; for a status that two codes share, the first row is the code it reads back as.
constexpr StatusRow k_status_table[] = {
    {ErrorCode::invalid_input, 400}, {ErrorCode::unauthorized, 401}, {ErrorCode::forbidden, 403},
    {ErrorCode::not_found, 404},     {ErrorCode::conflict, 409},     {ErrorCode::not_implemented, 501},
    {ErrorCode::unavailable, 503},   {ErrorCode::internal, 500},     {ErrorCode::io, 500},
    // Read only (error_code_for_status): a peer without this method on the path has not got the
    // capability (a client newer than its coordinator).
    {ErrorCode::not_implemented, 405},
};

} // namespace

int http_status_for(ErrorCode code) {
    for (const auto& row : k_status_table) {
        if (row.code == code) {
            return row.status;
        }
    }
    return 500;
}

ErrorCode error_code_for_status(int status) {
    if (status >= 500) {
        return ErrorCode::unavailable;
    }
    if (status == 413) {
        return ErrorCode::invalid_input; // a body over the route's limit
    }
    for (const auto& row : k_status_table) {
        if (row.status == status) {
            return row.code;
        }
    }
    return ErrorCode::internal;
}

Response json_error(int status, std::string_view error, std::string_view detail, std::string_view field) {
    nlohmann::ordered_json j;
    j["error"] = std::string(error);
    j["detail"] = std::string(detail);
    if (!field.empty()) {
        j["field"] = std::string(field);
    }
    Response r;
    r.status = status;
    r.body = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return r;
}

Response json_response(int status, std::string body) {
    Response r;
    r.status = status;
    r.body = std::move(body);
    return r;
}

std::string_view status_reason(int status) {
    if (status < 100 || status > 999) {
        return {};
    }
    auto sv = boost::beast::http::obsolete_reason(static_cast<boost::beast::http::status>(status));
    if (sv == "<unknown-status>") {
        return {};
    }
    return {sv.data(), sv.size()};
}

} // namespace gpupool::net

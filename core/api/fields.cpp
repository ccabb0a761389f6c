#include "core/api/fields.hpp"

namespace gpupool::api::fields {

using nlohmann::json;

namespace {

Error invalid(std::string message, const std::string& field) {
    return make_error(ErrorCode::invalid_input, std::move(message), field);
}

// The member, or nullptr when absent or null (an error then if it is required).
Result<const json*> member(const json& j, const char* key, const std::string& at, bool required) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
        if (required) {
            return invalid("missing required field", path(at, key));
        }
        return static_cast<const json*>(nullptr);
    }
    return &*it;
}

bool absent(const json& j, const char* key) {
    auto it = j.find(key);
    return it == j.end() || it->is_null();
}

} // namespace

std::string path(const std::string& at, const char* key) { return at.empty() ? std::string(key) : at + "." + key; }

Status integer(const json& j, const char* key, std::int64_t& out, const std::string& at, bool required) {
    auto m = member(j, key, at, required);
    if (!m) {
        return m.error();
    }
    if (*m == nullptr) {
        return {};
    }
    if (!(*m)->is_number_integer()) {
        return invalid(std::string("expected an integer, got ") + (*m)->type_name(), path(at, key));
    }
    out = (*m)->get<std::int64_t>();
    return {};
}

Status integer(const json& j, const char* key, std::optional<std::int64_t>& out, const std::string& at) {
    out.reset();
    std::int64_t v = 0;
    if (!absent(j, key)) {
        if (auto st = integer(j, key, v, at); !st) {
            return st;
        }
        out = v;
    }
    return {};
}

Status text(const json& j, const char* key, std::string& out, const std::string& at, bool required,
            std::size_t max_bytes) {
    auto m = member(j, key, at, required);
    if (!m) {
        return m.error();
    }
    if (*m == nullptr) {
        return {};
    }
    if (!(*m)->is_string()) {
        return invalid(std::string("wrong type: got ") + (*m)->type_name(), path(at, key));
    }
    const auto& s = (*m)->get_ref<const std::string&>();
    if (max_bytes > 0 && s.size() > max_bytes) {
        return invalid("longer than " + std::to_string(max_bytes) + " bytes", path(at, key));
    }
    out = s;
    return {};
}

Status text(const json& j, const char* key, std::optional<std::string>& out, const std::string& at) {
    out.reset();
    std::string v;
    if (!absent(j, key)) {
        if (auto st = text(j, key, v, at); !st) {
            return st;
        }
        out = std::move(v);
    }
    return {};
}

Status boolean(const json& j, const char* key, bool& out, const std::string& at, bool required) {
    auto m = member(j, key, at, required);
    if (!m) {
        return m.error();
    }
    if (*m == nullptr) {
        return {};
    }
    if (!(*m)->is_boolean()) {
        return invalid(std::string("wrong type: got ") + (*m)->type_name(), path(at, key));
    }
    out = (*m)->get<bool>();
    return {};
}

Status object(const json& j, const std::string& at) {
    if (!j.is_object()) {
        return invalid(std::string("expected an object, got ") + j.type_name(), at.empty() ? "body" : at);
    }
    return {};
}

json or_null(const std::optional<std::int64_t>& v) { return v ? json(*v) : json(); }

} // namespace gpupool::api::fields

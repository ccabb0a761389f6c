#include "core/util/result.hpp"

#include <ostream>

namespace gpupool {

const char* to_string(ErrorCode code) {
    switch (code) {
    case ErrorCode::invalid_input: return "invalid_input";
    case ErrorCode::not_found: return "not_found";
    case ErrorCode::io: return "io";
    case ErrorCode::unauthorized: return "unauthorized";
    case ErrorCode::forbidden: return "forbidden";
    case ErrorCode::conflict: return "conflict";
    case ErrorCode::unavailable: return "unavailable";
    case ErrorCode::not_implemented: return "not_implemented";
    case ErrorCode::internal: return "internal";
    }
    return "internal";
}

std::string Error::describe() const {
    std::string out;
    if (where && !where->file.empty()) {
        out += where->file;
        if (where->line > 0) {
            out += ':' + std::to_string(where->line);
            if (where->column > 0) {
                out += ':' + std::to_string(where->column);
            }
        }
        out += ": ";
    }
    if (!field.empty()) {
        out += field + ": ";
    }
    out += message;
    return out;
}

Error make_error(ErrorCode code, std::string message, std::string field) {
    Error e;
    e.code = code;
    e.message = std::move(message);
    e.field = std::move(field);
    return e;
}

ErrorException::ErrorException(Error error) : std::runtime_error(error.describe()), m_error(std::move(error)) {}

std::ostream& operator<<(std::ostream& os, const Error& error) { return os << error.describe(); }

void throw_exception_from_error(const Error& error, const boost::source_location&) {
    throw ErrorException(error);
}

} // namespace gpupool

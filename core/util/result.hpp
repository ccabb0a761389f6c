// Result<T>: the one type gpupool uses for failures a caller is expected to handle.
//
// A Result holds either a value or an Error. Errors carry a machine-readable code, a message
// written for the person who will read it, and (when the failure is about input) where the input
// was wrong: a file with line and column, or a field path such as `resources.gpu` for HTTP bodies.
// Only cmd/ turns an Error into an exit code; the layers below return them. Broken invariants are
// asserts, not Errors. Third-party exceptions (toml++, SQLiteCpp, nlohmann) are caught in the
// adapter that calls the library and converted here.
//
// Result is boost::system::result because every compiler on our machines has it (clang 14/16 with
// this libstdc++ lack std::expected, and the fuzz build uses clang). Thread safety: a value type.
#pragma once

#include <boost/system/result.hpp>

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gpupool {

enum class ErrorCode : std::uint8_t {
    invalid_input,   // the caller's input is wrong (bad recipe, bad flag, bad request body)
    not_found,       // a named thing does not exist
    io,              // file system or network trouble
    unauthorized,    // missing or bad credentials
    forbidden,       // credentials are fine but the role/team may not do this
    conflict,        // the request contradicts current state (e.g. a stale attempt)
    unavailable,     // a peer is unreachable or overloaded; retrying may help
    not_implemented, // the capability has not landed yet
    internal,        // a bug or an unexpected library failure
};

const char* to_string(ErrorCode code);

// A position in a text input. Lines and columns count from 1; 0 means "unknown".
struct SourcePos {
    std::string file;
    std::uint32_t line = 0;
    std::uint32_t column = 0;
};

struct Error {
    ErrorCode code = ErrorCode::internal;
    std::string message;
    std::string field;                // dotted path of the offending field, if any
    std::optional<SourcePos> where;   // where in a file, if the input was a file
    std::vector<Error> more;          // further problems found in the same input, in order

    // "file:line:col: field: message" (the parts that are known).
    std::string describe() const;
};

Error make_error(ErrorCode code, std::string message, std::string field = {});

// make_error(ErrorCode::invalid_input, ...): bad input from a user, a file or the network.
inline Error invalid_input(std::string message, std::string field = {}) {
    return make_error(ErrorCode::invalid_input, std::move(message), std::move(field));
}

// Thrown only when a caller calls .value() on a Result that holds an Error (a programming error
// in the caller, or deliberate escalation).
class ErrorException : public std::runtime_error {
public:
    explicit ErrorException(Error error);
    const Error& error() const noexcept { return m_error; }

private:
    Error m_error;
};

// For test frameworks and logs: prints describe().
std::ostream& operator<<(std::ostream& os, const Error& error);

[[noreturn]] void throw_exception_from_error(const Error& error, const boost::source_location& loc);

template <class T>
using Result = boost::system::result<T, Error>;

using Status = boost::system::result<void, Error>;

} // namespace gpupool

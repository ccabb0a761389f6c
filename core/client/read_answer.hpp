// read_answer: a coordinator's answer read with one of core/api's *_from_json functions, for every
// client of the API (JobsClient, the admin and credit commands). An answer whose bytes are not what
// this client expects becomes an Error (ErrorCode::internal) that says which request it answered and
// names the member, never an exception; a failed request's error is passed on as it is.
#pragma once

#include "core/util/result.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace gpupool::client {

template <class Read>
auto read_answer(const Result<nlohmann::json>& answer, std::string_view what, Read read) -> decltype(read(*answer)) {
    if (!answer) {
        return answer.error();
    }
    auto value = read(*answer);
    if (!value) {
        Error e = value.error();
        e.code = ErrorCode::internal;
        e.message = "the coordinator's answer to " + std::string(what) +
                    " is not what this client expects: " + (e.field.empty() ? "" : "`" + e.field + "`: ") + e.message;
        return e;
    }
    return value;
}

} // namespace gpupool::client

// What a *_from_json says of a hostile answer, for the wire tests: the error (it must be one, and
// invalid_input), or just the member it names.
#pragma once

#include "core/util/result.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>

namespace gpupool::test {

template <class T, class Read>
Error error_of(Read read, const nlohmann::json& j) {
    Result<T> r = read(j);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ErrorCode::invalid_input);
    return r.error();
}

template <class T, class Read>
std::string field_of(Read read, const nlohmann::json& j) {
    return error_of<T>(read, j).field;
}

} // namespace gpupool::test

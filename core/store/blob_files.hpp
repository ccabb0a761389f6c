// What every store does before it takes a blob (an attempt's outputs, an input archive) from a file:
// its size, and the store's cap on it. Shared by the engines' put_output and put_input_blob.
#pragma once

#include "core/util/result.hpp"

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace gpupool::store {

// The file's size; throws std::runtime_error (the caller's transaction then rolls back) when it cannot be read.
inline std::int64_t blob_file_size(const std::filesystem::path& file) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(file, ec);
    if (ec) {
        throw std::runtime_error("cannot read " + file.string() + ": " + ec.message());
    }
    return static_cast<std::int64_t>(size);
}

// A blob over the store's cap is refused before anything is written.
inline Status check_blob_size(std::int64_t size, std::int64_t max_bytes) {
    if (size > max_bytes) {
        return make_error(ErrorCode::invalid_input, "the archive is " + std::to_string(size) +
                                                        " bytes, over the store's limit of " +
                                                        std::to_string(max_bytes) + " bytes");
    }
    return {};
}

} // namespace gpupool::store

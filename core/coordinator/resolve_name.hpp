// resolve_name: what an admin typed for a worker, a team or a token (its id, or its name or label)
// turned into the one id it means. Every admin route that takes one of them resolves it here, so
// every client gets the same rules and the same messages. Pure; thread-safe.
//
// Rules:
// - An exact id always wins: digits that are the id of one of `candidates` mean that one, even if
//   something else is named so.
// - Otherwise the name: exactly one candidate named so is it; several are an error (invalid_input)
//   listing each with its id (and its note: a worker's state, a token's team), so the admin can
//   pick one by id.
// - No match is not_found; the message names the nearest name (util::nearest: "did you mean").
// Errors name `field`.
#pragma once

#include "core/util/result.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace gpupool::coordinator {

struct NamedCandidate {
    std::int64_t id = 0;
    std::string name;
    std::string note; // shown beside the id when the name is ambiguous ("offline", "team fellows"); may be empty
};

// `kind` is the thing's noun in messages ("worker", "team", "token"); `hint` ends the not-found
// message (where to see the names: "see `gpupool admin workers`"), may be empty.
Result<std::int64_t> resolve_name(const std::string& kind, const std::string& text,
                                  const std::vector<NamedCandidate>& candidates, const std::string& field,
                                  const std::string& hint = "");

} // namespace gpupool::coordinator

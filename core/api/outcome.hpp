// How an attempt ended, as the worker reports it and the coordinator reads it (docs/api.md,
// complete): one enum on both sides of the wire, with its names there.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gpupool::api {

enum class Outcome : std::uint8_t {
    exited,          // the job's process ended by itself (exit_code), or was stopped by the pool's rules
    worker_fault,    // the worker could not run it (start failure, lost on restart): not the job's fault
    owner_preempted, // the GPU's owner took the machine back (drain): not the job's fault
    // The job's image cannot be had (not found, access denied, a bad manifest or reference): the
    // job's own error, with the engine's words as the reason; it never started, so it is not charged,
    // and the same image fails everywhere, so the job fails without another attempt.
    image_unavailable,
};

const char* to_string(Outcome outcome);
std::optional<Outcome> outcome_from_string(std::string_view name);

} // namespace gpupool::api

// What an engine's failed pull means: whether the job's image cannot be had (the job's own error)
// or the engine or the network failed (nobody's fault that the job could fix). The agent pulls each
// job's image before the job starts (ContainerRuntime::ensure_image, in the waiting room beside the
// model prefetch), so the pull is neither billed nor timed as the job's runtime.
//
// Rules (conservative: only a registry's clear answer about this image is the job's):
// - The job's (PullVerdict::image_unavailable): the registry does not know the image or its tag
//   ("manifest unknown", "name unknown", docker's "manifest for … not found", "repository does not
//   exist"), refuses it ("denied", "unauthorized", "authentication required"), has no image for this
//   platform ("no matching manifest", "no image found in manifest list"), or the reference itself is
//   invalid ("invalid reference format", "must be lowercase").
// - Everything else is the engine's (PullVerdict::engine): a registry that cannot be reached
//   (refused, no such host, timeouts, TLS), rate limits, a local storage error ("permission denied"
//   is not a registry's "denied"), an engine that is not running. Then the job starts as it did
//   before pulls were separate: the engine's own run decides.
// Pure, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpupool::worker {

enum class PullVerdict : std::uint8_t { image_unavailable, engine };

PullVerdict classify_pull_failure(std::string_view engine_message);

// The engine's message for people: its last non-empty line (podman prints its retries before it),
// without a leading "Error: " or "Error response from daemon: ", at most 1,000 bytes.
std::string pull_error_line(std::string_view engine_stderr);

} // namespace gpupool::worker

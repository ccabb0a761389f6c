// Image references: the one check a container image name passes before it may reach podman or
// docker. The image is put on the engine's command line (`podman run <flags> -- IMAGE argv...`), so
// a value that is not a reference (`--privileged`, `-v/:/host`) must never get that far. The TOML
// parser, recipe::job_from_json (the coordinator's API and the worker's assignments) and the OCI
// runtime's start() all call validate_image_reference.
//
// Rules (the OCI distribution reference grammar, github.com/distribution/reference):
//   reference      := name [":" tag] ["@" digest]
//   name           := [domain "/"] path-component ("/" path-component)*, at most 255 characters
//   domain         := host [":" port]; host is DNS labels joined by ".", or "[" IPv6 "]"
//   path-component := [a-z0-9]+ (separator [a-z0-9]+)*, separator := "." | "_" | "__" | "-"+
//   tag            := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
//   digest         := "sha256:" 64 lowercase hex digits | "sha512:" 128 (the engines know no others)
// - As docker decides it, the first component is a domain only when it contains "." or ":", is
//   "localhost" or is a bracketed IPv6 address; otherwise it is a path component and must be
//   lowercase (so `UPPER/case` is refused rather than taken for a host name).
// - Hence a valid reference never starts with "-" and holds no space, NUL, control character or
//   non-ASCII byte.
// Pure functions, thread-safe. Failure: an invalid_input Error with field "image" whose message
// says what is wrong with the reference (callers in the parser add the file position).
#pragma once

#include "core/util/result.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace gpupool::recipe {

inline constexpr std::size_t k_max_image_name_length = 255; // the name, without tag and digest

Status validate_image_reference(std::string_view reference);

// The image fully qualified, as the engines resolve it: "ubuntu:22.04" ->
// "docker.io/library/ubuntu:22.04", "me/x" -> "docker.io/me/x:latest"; a reference whose first
// component is a host ("ghcr.io/...", "localhost/...", "host:5000/...") keeps it; a reference
// without a tag or digest gets `:latest`. The one normalization of an image: what a worker owner's
// `registries` prefixes are matched against (api::outside_terms, sched::WorkerTerms) is what the
// engine is given to run (oci_runtime's build_run_argv), so no short-name search (podman's
// unqualified-search-registries) can pull from a registry the owner did not allow. For a valid
// reference (validate_image_reference).
std::string qualified_image(std::string_view image);

// The grammar's tokens, whole-string matches (exposed for the tests, which check them against the
// regular expressions they replaced).
namespace detail {
bool is_path_component(std::string_view s); // [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*
bool is_host_name(std::string_view s);      // DNS labels: [a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?, joined by "."
bool is_ipv6_literal(std::string_view s);   // \[[a-fA-F0-9:]+\]
bool is_port(std::string_view s);           // [0-9]{1,5}
bool is_tag(std::string_view s);            // [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
} // namespace detail

// Exactly `digits` lowercase hex digits ([a-f0-9]{digits}): a digest's hex part (64 for SHA-256), a
// git commit (40). The one check of that shape for recipes, wire messages and the client.
bool is_lower_hex(std::string_view s, std::size_t digits);

} // namespace gpupool::recipe

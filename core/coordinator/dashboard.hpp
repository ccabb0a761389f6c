// The dashboard's files: the page the coordinator serves at `/` and its script and style sheet,
// written by hand in core/coordinator/dashboard/ and embedded in the binary at build time
// (cmake/embed_files.cmake turns each into a byte array), so a coordinator needs no file beside it
// and no network to serve them. They hold no data: the page asks the token-checked /v1 API for it.
// Immutable for the program's life; safe from any thread.
#pragma once

#include <span>
#include <string_view>

namespace gpupool::coordinator {

struct EmbeddedFile {
    std::string_view name;  // its name in core/coordinator/dashboard/, e.g. "app.js"
    std::string_view bytes; // its contents, as written
};

// Every file of the dashboard, sorted by name.
std::span<const EmbeddedFile> dashboard_files();

} // namespace gpupool::coordinator

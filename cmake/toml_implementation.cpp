// The static build's one copy of toml++'s implementation (cmake/static_deps.cmake): the other files
// include toml++ with TOML_HEADER_ONLY=0 and only declare what this file defines.
#define TOML_IMPLEMENTATION
#include <toml++/toml.h>

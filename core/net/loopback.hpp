// Whether a listen host stays on this machine: an IPv4 address in 127.0.0.0/8, ::1, or "localhost".
// For listeners that serve without a token (the coordinator's --metrics-listen). Pure.
#pragma once

#include <string_view>

namespace gpupool::net {

bool is_loopback_host(std::string_view host);

} // namespace gpupool::net

// Listen addresses as `--listen`-style flags give them: the host of HOST:PORT, and whether a host
// stays on this machine (an IPv4 address in 127.0.0.0/8, ::1, or "localhost"), for listeners that
// serve without a token (the coordinator's --metrics-listen). Pure.
#pragma once

#include <string>
#include <string_view>

namespace gpupool::net {

// "127.0.0.1:9464" -> "127.0.0.1", "[::1]:9464" -> "::1"; "" without a colon.
std::string listen_host(std::string_view host_port);
bool is_loopback_host(std::string_view host);

} // namespace gpupool::net

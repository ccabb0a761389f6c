#include "core/net/loopback.hpp"

#include <boost/asio/ip/address.hpp>


namespace gpupool::net {

std::string listen_host(std::string_view host_port) {
    const auto colon = host_port.rfind(':');
    if (colon == std::string_view::npos) {
        return {};
    }
    std::string_view host = host_port.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
    }
    return std::string(host);
}

bool is_loopback_host(std::string_view host) {
    if (host == "localhost") {
        return true;
    }
    boost::system::error_code ec;
    const auto address = boost::asio::ip::make_address(std::string(host), ec);
    return !ec && address.is_loopback();
}

} // namespace gpupool::net

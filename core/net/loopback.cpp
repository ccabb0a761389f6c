#include "core/net/loopback.hpp"

#include <boost/asio/ip/address.hpp>

#include <string>

namespace gpupool::net {

bool is_loopback_host(std::string_view host) {
    if (host == "localhost") {
        return true;
    }
    boost::system::error_code ec;
    const auto address = boost::asio::ip::make_address(std::string(host), ec);
    return !ec && address.is_loopback();
}

} // namespace gpupool::net

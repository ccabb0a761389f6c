// ApiClient: the researcher's and admin's view of the coordinator's /v1 API, over HttpClient.
//
// Every call returns the JSON body of a 2xx answer, or an Error a person can act on: network
// failures name the URL (ErrorCode::unavailable); 401 says to check the token and where it came
// from; 403, 404, 409 keep the server's detail; 400 keeps the field the server named. One client
// per thread (it owns a curl handle).
#pragma once

#include "core/config/client_config.hpp"
#include "core/net/http_client.hpp"
#include "core/util/result.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace gpupool::client {

class ApiClient {
public:
    explicit ApiClient(const config::ClientConfig& config);

    Result<nlohmann::json> get(std::string_view path);
    Result<nlohmann::json> post(std::string_view path, const nlohmann::json& body);
    Result<nlohmann::json> del(std::string_view path);
    // Raw bytes (e.g. outputs, input archives).
    Result<std::string> get_bytes(std::string_view path);
    Result<nlohmann::json> put_bytes(std::string_view path, std::string_view body);
    // A large answer (a backup) written to the new file `to` as it arrives; `to` holds it only
    // when this succeeds (the caller removes it otherwise). `timeout`: for the whole transfer.
    Status download(std::string_view method, std::string_view path, const std::filesystem::path& to,
                    std::chrono::milliseconds timeout);

private:
    Result<net::Response> send(std::string_view method, std::string_view path, std::string_view body);
    Error http_error(const net::Response& r, std::string_view method, std::string_view path) const;
    // A transport failure names the coordinator and where its URL came from; a non-2xx answer
    // becomes http_error's Error.
    Result<net::Response> checked(Result<net::Response> r, std::string_view method, std::string_view path) const;

    config::ClientConfig m_config;
    net::HttpClient m_http;
};

} // namespace gpupool::client

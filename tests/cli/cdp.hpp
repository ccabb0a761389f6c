// Real headless Chromium for tests, driven over the Chrome DevTools Protocol (CDP).
//
// Chromium: starts `chromium --headless=new --no-sandbox --disable-gpu` with a fresh profile in
// its own process group and reads the DevTools address it prints; the destructor kills the whole
// group (the browser and every helper it started) and removes the profile, on every exit path.
// CdpSession: one WebSocket to one target (a page), written with Boost.Beast. call() sends a
// method and waits for the answer with its id; events that arrive meanwhile are kept in events()
// in arrival order. Failures (no browser, a dead socket, a CDP error answer, a timeout) throw
// std::runtime_error with what happened: these are test helpers, and Catch reports the message.
// Not thread-safe: one thread drives a session.
#pragma once

#include "tests/support.hpp"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/process.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::test {

// Where chromium is (PATH, or /usr/bin/chromium), or nullopt when it is not installed.
std::optional<std::filesystem::path> find_chromium();

class Chromium {
public:
    // Starts the browser; throws when it does not print its DevTools address within `within`.
    explicit Chromium(const std::filesystem::path& binary, std::chrono::milliseconds within = std::chrono::seconds(30));
    ~Chromium();
    Chromium(const Chromium&) = delete;
    Chromium& operator=(const Chromium&) = delete;

    std::uint16_t port() const { return m_port; }
    // The WebSocket URL of the first page target (GET /json/list on the DevTools port).
    std::string page_websocket_url() const;
    std::string stderr_text() const;

private:
    TempDir m_dir; // the profile and the browser's stderr
    boost::process::group m_group;
    boost::process::child m_child;
    std::uint16_t m_port = 0;
};

class CdpSession {
public:
    using json = nlohmann::json;

    // Connects to a ws://127.0.0.1:PORT/... URL.
    explicit CdpSession(const std::string& ws_url);
    ~CdpSession();
    CdpSession(const CdpSession&) = delete;
    CdpSession& operator=(const CdpSession&) = delete;

    // Sends `method` with `params` and returns the answer's `result`; throws on an error answer or
    // when none comes within `timeout`.
    json call(const std::string& method, const json& params = json::object(),
              std::chrono::milliseconds timeout = std::chrono::seconds(15));
    // Evaluates a JavaScript expression in the page and returns its value (by value: JSON-able).
    json evaluate(const std::string& expression);
    // Reads what arrives for `how_long` (events land in events()).
    void pump(std::chrono::milliseconds how_long);
    // Until `done()` holds, reading events meanwhile; false when `within` ran out first.
    bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds within,
                    std::chrono::milliseconds step = std::chrono::milliseconds(100));

    // Every event received so far, oldest first: {"method": ..., "params": ...}.
    const std::vector<json>& events() const { return m_events; }

private:
    void arm_read();
    // Runs the socket's handlers until `deadline` or until a message with `id` arrived (0: any).
    void run_until(std::chrono::steady_clock::time_point deadline, std::int64_t id);

    boost::asio::io_context m_ioc;
    boost::beast::websocket::stream<boost::beast::tcp_stream> m_ws;
    boost::beast::flat_buffer m_buffer;
    std::int64_t m_next_id = 1;
    std::deque<json> m_answers; // answers not yet claimed by call()
    std::vector<json> m_events;
    std::string m_failed; // why the socket stopped, once it has
};

// Decodes base64 (CDP's screenshots) with OpenSSL; throws on text that is not base64.
std::string base64_decode(const std::string& text);

} // namespace gpupool::test

// Headless Chromium and a small CDP client for the dashboard's browser test (cdp.hpp).
#include "tests/cli/cdp.hpp"

#include "core/net/http_client.hpp"

#include <openssl/evp.h>

#include <cstdlib>
#include <regex>
#include <stdexcept>
#include <thread>

namespace gpupool::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bp = boost::process;
namespace fs = std::filesystem;
using json = nlohmann::json;

std::optional<fs::path> find_chromium() {
    fs::path found = bp::search_path("chromium");
    if (found.empty() && fs::exists("/usr/bin/chromium")) {
        found = "/usr/bin/chromium";
    }
    return found.empty() ? std::nullopt : std::optional<fs::path>(found);
}

Chromium::Chromium(const fs::path& binary, std::chrono::milliseconds within) {
    const std::vector<std::string> args{"--headless=new",
                                        "--no-sandbox",
                                        "--disable-gpu",
                                        "--user-data-dir=" + (m_dir.path() / "profile").string(),
                                        "--remote-debugging-port=0",
                                        "--remote-debugging-address=127.0.0.1",
                                        "--no-first-run",
                                        "--no-default-browser-check",
                                        "--disable-extensions",
                                        "--disable-background-networking",
                                        "--disable-component-update",
                                        "--disable-sync",
                                        "--disable-dev-shm-usage",
                                        "--mute-audio",
                                        "--password-store=basic",
                                        "about:blank"};
    // Its own process group: the destructor kills the browser and every helper it forked.
    m_child = bp::child(bp::exe = binary.string(), bp::args = args, bp::std_out > (m_dir.path() / "stdout").string(),
                        bp::std_err > (m_dir.path() / "stderr").string(), bp::std_in < bp::null, m_group);
    static const std::regex k_listening(R"(DevTools listening on ws://127\.0\.0\.1:([0-9]+)/)");
    const auto end = std::chrono::steady_clock::now() + within;
    std::smatch m;
    while (std::chrono::steady_clock::now() < end && m_child.running()) {
        const std::string text = stderr_text();
        if (std::regex_search(text, m, k_listening)) {
            m_port = static_cast<std::uint16_t>(std::stoi(m[1].str()));
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const std::string why = stderr_text();
    std::error_code ec;
    m_group.terminate(ec);
    m_child.wait(ec);
    throw std::runtime_error("chromium printed no DevTools address; its stderr:\n" + why);
}

Chromium::~Chromium() {
    std::error_code ec;
    m_group.terminate(ec); // SIGKILL to the whole group
    if (m_child.valid()) {
        m_child.wait(ec);
    }
}

std::string Chromium::stderr_text() const {
    return slurp(m_dir.path() / "stderr");
}

std::string Chromium::page_websocket_url() const {
    net::ClientOptions o;
    o.base_url = "http://127.0.0.1:" + std::to_string(m_port);
    o.timeout = std::chrono::milliseconds(5'000);
    net::HttpClient c(o);
    for (int i = 0; i < 50; ++i) {
        auto r = c.request("GET", "/json/list");
        if (r && r->status == 200) {
            const json targets = json::parse(r->body, nullptr, false);
            for (const auto& t : targets.is_array() ? targets : json::array()) {
                if (t.value("type", "") == "page" && t.contains("webSocketDebuggerUrl")) {
                    return t["webSocketDebuggerUrl"].get<std::string>();
                }
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw std::runtime_error("chromium lists no page target on /json/list");
}

CdpSession::CdpSession(const std::string& ws_url) : m_ws(m_ioc) {
    static const std::regex k_url(R"(ws://([^/:]+):([0-9]+)(/.*))");
    std::smatch m;
    if (!std::regex_match(ws_url, m, k_url)) {
        throw std::runtime_error("not a ws:// URL: " + ws_url);
    }
    asio::ip::tcp::resolver resolver(m_ioc);
    auto& tcp = beast::get_lowest_layer(m_ws);
    tcp.expires_after(std::chrono::seconds(10));
    tcp.connect(resolver.resolve(m[1].str(), m[2].str()));
    m_ws.set_option(beast::websocket::stream_base::timeout::suggested(beast::role_type::client));
    m_ws.read_message_max(std::size_t{256} << 20); // screenshots arrive as one base64 message
    m_ws.handshake(m[1].str() + ":" + m[2].str(), m[3].str());
    tcp.expires_never();
    m_ws.text(true);
    arm_read();
}

CdpSession::~CdpSession() {
    beast::error_code ec;
    beast::get_lowest_layer(m_ws).socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    beast::get_lowest_layer(m_ws).socket().close(ec);
    m_ioc.restart();
    m_ioc.run_for(std::chrono::milliseconds(200)); // the read ends, aborted
}

void CdpSession::arm_read() {
    m_ws.async_read(m_buffer, [this](beast::error_code ec, std::size_t) {
        if (ec) {
            m_failed = ec.message();
            return;
        }
        json msg = json::parse(beast::buffers_to_string(m_buffer.data()), nullptr, false);
        m_buffer.consume(m_buffer.size());
        if (!msg.is_object()) {
            m_failed = "a message that is not a JSON object";
            return;
        }
        if (msg.contains("id")) {
            m_answers.push_back(std::move(msg));
        } else {
            m_events.push_back(std::move(msg));
        }
        arm_read();
    });
}

void CdpSession::run_until(std::chrono::steady_clock::time_point deadline, std::int64_t id) {
    const auto answered = [&] {
        for (const auto& a : m_answers) {
            if (a["id"] == id) {
                return true;
            }
        }
        return false;
    };
    while (m_failed.empty() && std::chrono::steady_clock::now() < deadline && !(id != 0 && answered())) {
        m_ioc.run_one_until(deadline);
        if (m_ioc.stopped()) {
            m_ioc.restart();
        }
    }
}

json CdpSession::call(const std::string& method, const json& params, std::chrono::milliseconds timeout) {
    if (!m_failed.empty()) {
        throw std::runtime_error(method + ": the DevTools socket failed earlier: " + m_failed);
    }
    const std::int64_t id = m_next_id++;
    m_ws.write(asio::buffer(json{{"id", id}, {"method", method}, {"params", params}}.dump()));
    run_until(std::chrono::steady_clock::now() + timeout, id);
    for (auto it = m_answers.begin(); it != m_answers.end(); ++it) {
        if ((*it)["id"] == id) {
            json answer = std::move(*it);
            m_answers.erase(it);
            if (answer.contains("error")) {
                throw std::runtime_error(method + " failed: " + answer["error"].dump());
            }
            return answer.value("result", json::object());
        }
    }
    throw std::runtime_error(method + ": no answer within " + std::to_string(timeout.count()) + " ms" +
                             (m_failed.empty() ? std::string() : " (" + m_failed + ")"));
}

json CdpSession::evaluate(const std::string& expression) {
    const json r =
        call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}, {"awaitPromise", true}});
    if (r.contains("exceptionDetails")) {
        throw std::runtime_error("evaluating `" + expression + "` threw: " + r["exceptionDetails"].dump());
    }
    return r["result"].value("value", json());
}

void CdpSession::pump(std::chrono::milliseconds how_long) {
    run_until(std::chrono::steady_clock::now() + how_long, 0);
}

bool CdpSession::wait_until(const std::function<bool()>& done, std::chrono::milliseconds within,
                            std::chrono::milliseconds step) {
    const auto end = std::chrono::steady_clock::now() + within;
    while (!done()) {
        if (std::chrono::steady_clock::now() >= end) {
            return false;
        }
        pump(step);
    }
    return true;
}

std::string base64_decode(const std::string& text) {
    if (text.size() % 4 != 0) {
        throw std::runtime_error("base64: length is not a multiple of 4");
    }
    std::string out(text.size() / 4 * 3, '\0');
    const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
    if (n < 0) {
        throw std::runtime_error("base64: not base64");
    }
    // EVP_DecodeBlock counts the padding as zero bytes.
    std::size_t pad = 0;
    while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') {
        ++pad;
    }
    out.resize(static_cast<std::size_t>(n) - pad);
    return out;
}

} // namespace gpupool::test

// FakeHub: a small Beast/Asio server on loopback that stands in for the Hugging Face hub (and, a second
// one, for its CDN): it answers what a test tells it to for each target, honours Range requests, can cut a
// body off midway, trickle it, or redirect, and records what it was asked. TestRepo is a tiny repository
// (a 3 MiB LFS file, a nested file, a duplicate blob) served in the hub API's shapes. For the downloader's
// tests and the agent's end-to-end ones. Thread-safe (the server runs its own threads).
#pragma once

#include "core/util/sha256.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <vector>

namespace gpupool::test::hub {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

// ---- FakeHub ----------------------------------------------------------------------------------------------

struct Seen {
    std::string target;
    std::string range;
    std::string authorization;
};

struct Reply {
    Reply() = default;
    Reply(int s, std::string b) : status(s), body(std::move(b)) {}
    static Reply redirect(std::string to) {
        Reply r;
        r.location = std::move(to);
        return r;
    }
    Reply& cut(std::int64_t at) {
        cut_at = at;
        return *this;
    }
    Reply& slowly() {
        trickle = true;
        return *this;
    }
    Reply& without_ranges() {
        ranges = false;
        return *this;
    }

    int status = 200;
    std::string body;
    std::string location;     // answer 302 to here
    std::int64_t cut_at = -1; // send this many body bytes, then close (once)
    bool trickle = false;     // the body in 64 KiB pieces, 20 ms apart
    bool ranges = true;       // honour Range (else answer 200 and the whole body)
};

class FakeHub {
public:
    FakeHub() : m_acceptor(m_ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
        m_port = m_acceptor.local_endpoint().port();
        m_thread = std::thread([this] { accept_loop(); });
    }
    ~FakeHub() {
        m_stopping = true;
        boost::system::error_code ec;
        tcp::socket wake(m_ioc);
        wake.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), m_port), ec);
        m_thread.join();
        std::vector<std::thread> connections;
        {
            std::lock_guard lock(m_mu);
            for (int fd : m_fds) {
                ::shutdown(fd, SHUT_RDWR);
            }
            connections.swap(m_connections);
        }
        for (auto& t : connections) {
            t.join();
        }
    }
    FakeHub(const FakeHub&) = delete;
    FakeHub& operator=(const FakeHub&) = delete;

    std::string url() const { return "http://127.0.0.1:" + std::to_string(m_port); }
    void set(const std::string& target, Reply r) {
        std::lock_guard lock(m_mu);
        m_replies[target] = std::move(r);
    }
    std::vector<Seen> seen() const {
        std::lock_guard lock(m_mu);
        return m_seen;
    }
    // The requests whose target starts with `prefix`.
    std::vector<Seen> seen(const std::string& prefix) const {
        std::vector<Seen> out;
        for (auto& s : seen()) {
            if (s.target.starts_with(prefix)) {
                out.push_back(s);
            }
        }
        return out;
    }

private:
    void accept_loop() {
        while (true) {
            boost::system::error_code ec;
            tcp::socket s(m_ioc);
            m_acceptor.accept(s, ec);
            if (m_stopping || ec) {
                return;
            }
            s.set_option(tcp::no_delay(true), ec); // no Nagle wait between the header and the body
            std::lock_guard lock(m_mu);
            m_fds.insert(s.native_handle());
            m_connections.emplace_back([this, sock = std::move(s)]() mutable { serve(std::move(sock)); });
        }
    }

    void serve(tcp::socket s) {
        const int fd = s.native_handle();
        boost::beast::flat_buffer buffer;
        while (!m_stopping) {
            http::request<http::string_body> req;
            boost::system::error_code ec;
            http::read(s, buffer, req, ec);
            if (ec || !answer(s, req)) {
                break;
            }
        }
        {
            std::lock_guard lock(m_mu);
            m_fds.erase(fd);
        }
        boost::system::error_code ec;
        s.shutdown(tcp::socket::shutdown_both, ec);
        s.close(ec);
    }

    // Writes the answer; false: close the connection.
    bool answer(tcp::socket& s, const http::request<http::string_body>& req) {
        Seen seen{std::string(req.target()), std::string(req[http::field::range]),
                  std::string(req[http::field::authorization])};
        Reply r(404, R"({"error":"Repository not found"})");
        {
            std::lock_guard lock(m_mu);
            m_seen.push_back(seen);
            if (auto it = m_replies.find(seen.target); it != m_replies.end()) {
                r = it->second;
                it->second.cut_at = -1; // cut once
            }
        }
        int status = r.status;
        std::string body = r.body;
        std::string extra;
        if (!r.location.empty()) {
            status = 302;
            body.clear();
            extra = "Location: " + r.location + "\r\n";
        } else if (status == 200 && r.ranges && seen.range.starts_with("bytes=")) {
            const auto from = std::stoull(seen.range.substr(6));
            const std::string size = std::to_string(body.size());
            if (from >= body.size()) {
                status = 416;
                extra = "Content-Range: bytes */" + size + "\r\n";
                body.clear();
            } else {
                status = 206;
                extra = "Content-Range: bytes " + std::to_string(from) + "-" + std::to_string(body.size() - 1) + "/" +
                        size + "\r\n";
                body = body.substr(from);
            }
        }
        const std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) +
                                 "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra + "\r\n";
        boost::system::error_code ec;
        asio::write(s, asio::buffer(head), ec);
        if (r.cut_at >= 0) {
            asio::write(s, asio::buffer(body.data(), std::min(body.size(), static_cast<std::size_t>(r.cut_at))), ec);
            return false;
        }
        constexpr std::size_t k_piece = 64 * 1024;
        for (std::size_t at = 0; !ec && at < body.size(); at += k_piece) {
            asio::write(s, asio::buffer(body.data() + at, std::min(k_piece, body.size() - at)), ec);
            if (r.trickle) {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
        }
        return !ec && !m_stopping;
    }

    static const char* reason(int status) {
        switch (status) {
        case 200:
            return "OK";
        case 206:
            return "Partial Content";
        case 302:
            return "Found";
        case 401:
            return "Unauthorized";
        case 403:
            return "Forbidden";
        case 404:
            return "Not Found";
        case 416:
            return "Range Not Satisfiable";
        default:
            return "Whatever";
        }
    }

    asio::io_context m_ioc;
    tcp::acceptor m_acceptor;
    std::uint16_t m_port = 0;
    std::thread m_thread;
    std::atomic<bool> m_stopping{false};
    mutable std::mutex m_mu;
    std::map<std::string, Reply> m_replies;
    std::vector<Seen> m_seen;
    std::vector<std::thread> m_connections;
    std::set<int> m_fds;
};

// ---- a tiny repository ------------------------------------------------------------------------------------

inline std::string git_blob_id(std::string_view content) {
    const std::string data = "blob " + std::to_string(content.size()) + std::string(1, '\0') + std::string(content);
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int len = 0;
    EVP_Digest(data.data(), data.size(), digest.data(), &len, EVP_sha1(), nullptr);
    return util::to_hex(digest.data(), len);
}

inline std::string pseudo_random(std::size_t n) {
    std::string out(n, '\0');
    std::uint32_t x = 12345;
    for (auto& c : out) {
        x = x * 1664525u + 1013904223u;
        c = static_cast<char>(x >> 24);
    }
    return out;
}

inline const std::size_t k_big = 3 * 1024 * 1024 + 17;

// 3 MiB and a bit, made once.
inline const std::string& big_content() {
    static const std::string content = pseudo_random(k_big);
    return content;
}

struct RepoFile {
    RepoFile(std::string n, std::string c, bool is_lfs = false)
        : name(std::move(n)), content(std::move(c)), lfs(is_lfs),
          hash(lfs ? util::sha256_hex(content) : git_blob_id(content)) {}
    std::string name;
    std::string content;
    bool lfs = false;
    std::string hash;
    const std::string& blob() const { return hash; }
};

inline const std::string k_commit = "c0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ff";
inline const std::string k_api = "/api/models/acme/tiny/revision/main?blobs=true";

struct TestRepo {
    std::vector<RepoFile> files = {
        {"config.json", R"({"model_type": "tiny"})"},
        {"model.safetensors", big_content(), true},
        {"tokenizer/vocab/vocab.txt", "a\nb\nc\n"},
        {"copy_of_config.json", R"({"model_type": "tiny"})"}, // the same blob as config.json
    };
    const RepoFile& file(const std::string& name) const {
        return *std::find_if(files.begin(), files.end(), [&](const RepoFile& f) { return f.name == name; });
    }
    nlohmann::json answer(const std::string& commit = k_commit) const {
        auto siblings = nlohmann::json::array();
        for (const auto& f : files) {
            nlohmann::json s = {{"rfilename", f.name}, {"size", f.content.size()}};
            if (f.lfs) {
                s["blobId"] = git_blob_id("version https://git-lfs.github.com/spec/v1\noid sha256:" + f.blob());
                s["lfs"] = {{"sha256", f.blob()}, {"size", f.content.size()}, {"pointerSize", 134}};
            } else {
                s["blobId"] = f.blob();
            }
            siblings.push_back(s);
        }
        return {{"id", "acme/tiny"}, {"sha", commit}, {"siblings", siblings}};
    }
    std::int64_t total_bytes() const {
        std::set<std::string> seen;
        std::int64_t sum = 0;
        for (const auto& f : files) {
            if (seen.insert(f.blob()).second) {
                sum += static_cast<std::int64_t>(f.content.size());
            }
        }
        return sum;
    }
    // The hub answers the API and the files; LFS files redirect to the CDN.
    void serve(FakeHub& hub, FakeHub& cdn, const std::string& api = k_api) const {
        hub.set(api, Reply(200, answer().dump()));
        for (const auto& f : files) {
            const std::string target = resolve(f.name);
            if (f.lfs) {
                hub.set(target, Reply::redirect(cdn.url() + "/lfs/" + f.blob()));
                cdn.set("/lfs/" + f.blob(), Reply(200, f.content));
            } else {
                hub.set(target, Reply(200, f.content));
            }
        }
    }
    static std::string resolve(const std::string& name) { return "/acme/tiny/resolve/" + k_commit + "/" + name; }
};


} // namespace gpupool::test::hub

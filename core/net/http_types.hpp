// The value types gpupool's HTTP layer speaks: requests, responses, headers, and the asynchronous
// handler signature shared by the server (http_server.hpp) and the client (http_client.hpp).
//
// The layer is JSON-agnostic: bodies are plain strings. The one exception is json_error(), the
// error body every part of the API uses: {"error": "<short code>", "detail": "<human text>"} plus
// "field" (the offending body field) when there is one.
//
// Asynchronous handlers. A Handler receives the Request and a Responder. It may answer right away
// or keep the Responder and answer later, from any thread (a long-poll: a coordinator thread
// answers up to ~25 s later). Rules:
//   - A Responder is answered at most once; later calls are ignored.
//   - Calling it after the client went away or after the server stopped is harmless (ignored).
//   - Dropping every copy without calling it answers 500 "no_response" (503 "shutting_down" while
//     the server stops), so a forgotten request never hangs a connection.
//   - Request::client tells whether the client is still there and can call back when it leaves.
// Thread safety: Request, Response and Headers are values. A Responder and a ClientLink may be used
// from any thread.
#pragma once

#include "core/util/files.hpp"
#include "core/util/tree_fd.hpp"
#include "core/util/thread_safety.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpupool::net {

// Header fields in arrival order; names compare case-insensitively.
class Headers {
public:
    using Field = std::pair<std::string, std::string>;

    void add(std::string name, std::string value);
    // Replaces every field called `name` with one field.
    void set(std::string name, std::string value);
    // The first value of `name`, or nullptr.
    const std::string* find(std::string_view name) const;
    std::string get(std::string_view name, std::string_view fallback = {}) const;
    bool contains(std::string_view name) const { return find(name) != nullptr; }

    const std::vector<Field>& fields() const { return m_fields; }
    bool empty() const { return m_fields.empty(); }
    auto begin() const { return m_fields.begin(); }
    auto end() const { return m_fields.end(); }

private:
    std::vector<Field> m_fields;
};

bool iequals(std::string_view a, std::string_view b);

// Tells a handler holding a Responder whether its client is still connected. The server marks the
// link gone when the peer closes or resets the connection, or when the server drops the connection
// (stop, timeout). Detection is best effort: a peer that vanishes without a FIN/RST is noticed only
// when its answer is written.
class ClientLink {
public:
    bool gone() const EXCLUDES(m_mutex);
    // Runs `callback` once when the client goes away before the answer is written: on a server
    // thread, or right now in this thread if it is already gone. Callbacks are dropped, uncalled,
    // once the answer has been written. Keep them short and non-blocking.
    void on_gone(std::function<void()> callback) EXCLUDES(m_mutex);

    // Server side: marks the link gone and runs the callbacks (in the calling thread).
    void notify_gone() EXCLUDES(m_mutex);
    // Server side: the answer was written; forget the callbacks.
    void finish() EXCLUDES(m_mutex);

private:
    mutable util::Mutex m_mutex;
    bool m_gone GUARDED_BY(m_mutex) = false;
    bool m_finished GUARDED_BY(m_mutex) = false;
    std::vector<std::function<void()>> m_callbacks GUARDED_BY(m_mutex);
};

// A request body the server wrote to a temporary file (routes with RouteOptions::body_to_file).
// The file is removed when the last Request holding it is gone; while it exists, it also holds
// one of the server's upload slots (ServerOptions::max_file_bodies).
class BodyFile {
public:
    // `dir`: what keeps the file's directory (the server's spool) until the file is removed.
    BodyFile(util::TempFile file, std::shared_ptr<void> slot, std::shared_ptr<const void> dir = {})
        : m_dir(std::move(dir)), m_file(std::move(file)), m_slot(std::move(slot)) {}
    const std::filesystem::path& path() const { return m_file.path(); }
    std::uint64_t size() const;

private:
    std::shared_ptr<const void> m_dir; // declared first: it outlives the file
    util::TempFile m_file;             // removed with us
    std::shared_ptr<void> m_slot;
};

struct Request {
    std::string method;                                // as sent, e.g. "GET"
    std::string target;                                // raw request target, "/v1/jobs/7/logs?offset=10"
    std::string path;                                  // percent-decoded path, "/v1/jobs/7/logs"
    std::map<std::string, std::string> query;          // decoded; a repeated key keeps its last value
    std::string route;                                 // matched pattern, "/v1/jobs/{id}/logs"
    std::map<std::string, std::string> path_params;    // {"id": "7"}
    Headers headers;
    std::string body;                                  // empty when body_file is set
    std::shared_ptr<const BodyFile> body_file;         // the body, for routes that spool it to disk
    std::string remote_address;                        // peer IP, "127.0.0.1" or "::1"
    std::uint16_t remote_port = 0;
    bool tls = false;
    std::shared_ptr<ClientLink> client;                // never null for requests from the server
    // The body's share of ServerOptions::max_body_memory, given back when the last copy of the
    // request is dropped: a handler that keeps its Request (or a copy) keeps the share reserved.
    std::shared_ptr<const void> body_hold;

    // Convenience lookups; "" when absent.
    std::string header(std::string_view name) const { return headers.get(name); }
    std::string param(const std::string& name) const;
    std::string query_value(const std::string& name) const;
};

struct Response {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    // Server side: when set, the body is this file's bytes instead (sent as read, never whole in
    // memory); the file is removed when the last holder lets go, after it was sent.
    std::shared_ptr<const util::TempFile> body_file{};
    // Server side: when set, the body is the bytes of the file open behind this descriptor, from its
    // start (sent as read; the server reads a duplicate of it, so one descriptor may serve one
    // response only while it lives). For files opened without following links (the coordinator's
    // --dist files).
    std::shared_ptr<const util::UniqueFd> body_fd{};
    Headers headers; // extra headers; the server sets Content-Length, Connection and Date itself
};

using Responder = std::function<void(Response)>;
using Handler = std::function<void(Request, Responder)>;

// A Response with the JSON error body {"error": error, "detail": detail[, "field": field]}.
Response json_error(int status, std::string_view error, std::string_view detail, std::string_view field = {});

// The one table between the project's error codes and HTTP statuses, used both ways: the server
// answers an Error with http_status_for(code); the clients turn a status back into a code (any 5xx
// is `unavailable`: worth a retry; a 4xx not in the table is `internal`).
int http_status_for(ErrorCode code);
ErrorCode error_code_for_status(int status);

// A Response with the given JSON text as body.
Response json_response(int status, std::string body);

// The standard reason phrase ("Not Found"), or "" for an unknown code.
std::string_view status_reason(int status);

} // namespace gpupool::net

// PostgresStore's libpq plumbing: parameters, result rows, the connection (with its one reset) and
// the transaction guard.
#include "core/store/postgres_internal.hpp"

#include <array>
#include <charconv>
#include <cstring>

namespace gpupool::store::pg {

namespace {

// libpq's messages end in a newline (and may hold several lines): one line for ours.
std::string one_line(const char* message) {
    std::string s = message != nullptr ? message : "";
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) {
        s.pop_back();
    }
    for (char& c : s) {
        if (c == '\n') {
            c = ' ';
        }
    }
    return s.empty() ? "unknown libpq error" : s;
}

// A message that might echo what it was given never carries the password.
std::string without(std::string message, const std::string& secret) {
    if (secret.empty()) {
        return message;
    }
    for (auto at = message.find(secret); at != std::string::npos; at = message.find(secret, at)) {
        message.replace(at, secret.size(), "(password)");
    }
    return message;
}

void ignore_notice(void* /*arg*/, const char* /*message*/) {}

} // namespace

// ---- parameters and rows -----------------------------------------------------------------------

Params& Params::add(std::int64_t v) {
    return add(std::string_view(std::to_string(v)));
}

Params& Params::add(std::string_view text) {
    m_values.emplace_back(text);
    m_null.push_back(false);
    m_lengths.push_back(static_cast<int>(text.size()));
    m_formats.push_back(0);
    return *this;
}

Params& Params::add(const std::optional<std::int64_t>& v) {
    return v ? add(*v) : add_null();
}

Params& Params::add_bytes(std::string_view bytes) {
    add(bytes);
    m_formats.back() = 1;
    return *this;
}

Params& Params::add_null() {
    add(std::string_view());
    m_null.back() = true;
    return *this;
}

std::vector<const char*> Params::pointers() const {
    std::vector<const char*> out;
    out.reserve(m_values.size());
    for (std::size_t i = 0; i < m_values.size(); ++i) {
        out.push_back(m_null[i] ? nullptr : m_values[i].data());
    }
    return out;
}

std::int64_t Row::integer(int col) const {
    const char* text = PQgetvalue(m_result, m_row, col);
    const char* end = text + std::strlen(text);
    std::int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(text, end, v);
    if (ec != std::errc() || ptr != end) {
        throw Failure(make_error(ErrorCode::io, std::string("unexpected value `") + text + "` where a number belongs"));
    }
    return v;
}

std::optional<std::int64_t> Row::opt_integer(int col) const {
    if (is_null(col)) {
        return std::nullopt;
    }
    return integer(col);
}

std::string Row::text(int col) const {
    return std::string(PQgetvalue(m_result, m_row, col), static_cast<std::size_t>(PQgetlength(m_result, m_row, col)));
}

std::string_view Row::bytes(int col) const {
    return {PQgetvalue(m_result, m_row, col), static_cast<std::size_t>(PQgetlength(m_result, m_row, col))};
}

std::int64_t Row::binary_integer(int col) const {
    const std::string_view b = bytes(col);
    if (b.size() != 8) {
        throw Failure(make_error(ErrorCode::io, "unexpected binary value where a BIGINT belongs"));
    }
    std::uint64_t v = 0;
    for (char c : b) {
        v = (v << 8) | static_cast<unsigned char>(c);
    }
    return static_cast<std::int64_t>(v);
}

std::int64_t affected(const Rows& r) {
    const char* n = PQcmdTuples(r.get());
    std::int64_t v = 0;
    std::from_chars(n, n + std::strlen(n), v);
    return v;
}

// ---- the connection ----------------------------------------------------------------------------

Result<std::unique_ptr<Connection>> Connection::connect(const std::string& url, const std::string& password) {
    // Keywords after `dbname` (which expands the URL) override the URL's; those before are defaults.
    std::array<const char*, 5> keys{"connect_timeout", "fallback_application_name", "dbname", nullptr, nullptr};
    std::array<const char*, 5> values{"10", "gpupool", url.c_str(), nullptr, nullptr};
    if (!password.empty()) {
        keys[3] = "password";
        values[3] = password.c_str();
    }
    PGconn* raw = PQconnectdbParams(keys.data(), values.data(), 1);
    if (raw == nullptr) {
        return make_error(ErrorCode::io, "database: cannot connect to PostgreSQL: out of memory");
    }
    std::unique_ptr<Connection> conn(new Connection(raw));
    if (PQstatus(raw) != CONNECTION_OK) {
        return make_error(ErrorCode::io, "database: cannot connect to PostgreSQL at " + conn->describe() + ": " +
                                             without(one_line(PQerrorMessage(raw)), password));
    }
    PQsetNoticeProcessor(raw, ignore_notice, nullptr); // NOTICEs (e.g. "already exists") are not ours to print
    return conn;
}

Connection::~Connection() {
    PQfinish(m_conn);
}

std::string Connection::describe() const {
    const char* host = PQhost(m_conn);
    const char* port = PQport(m_conn);
    const char* db = PQdb(m_conn);
    std::string where = host != nullptr && *host != '\0' ? host : "(default host)";
    if (port != nullptr && *port != '\0') {
        where += std::string(":") + port;
    }
    return where + "/" + (db != nullptr ? db : "");
}

Rows Connection::run(const char* sql, const Params& p, bool binary) {
    if (p.empty() && !binary) {
        return Rows(PQexec(m_conn, sql));
    }
    const auto values = p.pointers();
    return Rows(PQexecParams(m_conn, sql, p.size(), nullptr, values.data(), p.lengths(), p.formats(), binary ? 1 : 0));
}

Rows Connection::exec(const char* sql, const Params& p, bool binary) {
    // Nothing of the caller's transaction can be lost by a reset when none was open, or when the
    // connection was broken before this statement (the statement that broke it threw already).
    const bool fresh = PQstatus(m_conn) == CONNECTION_BAD || PQtransactionStatus(m_conn) == PQTRANS_IDLE;
    Rows r = run(sql, p, binary);
    const auto ok = [&r] {
        const auto status = PQresultStatus(r.get());
        return r && (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK);
    };
    if (!ok() && fresh && m_may_reset && PQstatus(m_conn) == CONNECTION_BAD) {
        PQreset(m_conn);
        if (PQstatus(m_conn) != CONNECTION_OK) {
            throw Failure(
                make_error(ErrorCode::io, "lost the connection to PostgreSQL at " + describe() +
                                              " and could not reconnect: " + one_line(PQerrorMessage(m_conn))));
        }
        r = run(sql, p, binary);
    }
    if (!ok()) {
        fail(r.get());
    }
    return r;
}

void Connection::fail(const PGresult* r) const {
    const char* state = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    if (state != nullptr && std::strcmp(state, k_fenced_sqlstate) == 0) {
        throw Failure(
            make_error(ErrorCode::conflict, one_line(PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY)), "lease"));
    }
    std::string message = one_line(r != nullptr ? PQresultErrorMessage(r) : PQerrorMessage(m_conn));
    if (message == "unknown libpq error") {
        message = one_line(PQerrorMessage(m_conn));
    }
    if (PQstatus(m_conn) == CONNECTION_BAD) {
        message = "lost the connection to PostgreSQL at " + describe() + ": " + message;
    }
    throw Failure(make_error(ErrorCode::io, message));
}

void Connection::rollback_quietly() noexcept {
    if (PQstatus(m_conn) == CONNECTION_OK && PQtransactionStatus(m_conn) != PQTRANS_IDLE) {
        PQclear(PQexec(m_conn, "ROLLBACK"));
    }
}

// ---- transactions ------------------------------------------------------------------------------

Transaction::Transaction(Connection& db, const char* begin) : m_db(db) {
    m_db.exec(begin);
}

Transaction::~Transaction() {
    if (m_open) {
        m_db.rollback_quietly();
    }
}

void Transaction::commit() {
    m_open = false; // a failed COMMIT has ended the transaction too
    m_db.exec("COMMIT");
}

void fence(Connection& db, std::int64_t epoch) {
    db.exec("SELECT gpupool_fence($1)", params(epoch));
}

} // namespace gpupool::store::pg

#include "tests/pg/pg_test_server.hpp"

#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <functional>
#include <iomanip>
#include <libpq-fe.h>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace gpupool::test {

namespace fs = std::filesystem;

namespace {

struct Finish {
    void operator()(PGconn* c) const noexcept { PQfinish(c); }
};
struct Clear {
    void operator()(PGresult* r) const noexcept { PQclear(r); }
};

void ignore_notice(void* /*arg*/, const char* /*message*/) {}

std::unique_ptr<PGconn, Finish> connect(const std::string& url) {
    std::unique_ptr<PGconn, Finish> c(PQconnectdb(url.c_str()));
    if (!c || PQstatus(c.get()) != CONNECTION_OK) {
        throw std::runtime_error("cannot connect to " + url + ": " + (c ? PQerrorMessage(c.get()) : "out of memory"));
    }
    PQsetNoticeProcessor(c.get(), ignore_notice, nullptr); // "does not exist, skipping" and the like
    return c;
}

std::string quoted_identifier(PGconn* c, const std::string& name) {
    char* q = PQescapeIdentifier(c, name.c_str(), name.size());
    std::string out = q != nullptr ? q : "";
    PQfreemem(q);
    return out;
}

std::string trimmed(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) {
        s.pop_back();
    }
    return s;
}

} // namespace

bool postgres_required() {
    const char* required = std::getenv("GPUPOOL_REQUIRE_POSTGRES");
    return required != nullptr && std::string(required) == "1";
}

std::optional<std::string> pg_unavailable() {
    const char* file = std::getenv("GPUPOOL_TEST_PG_URL_FILE");
    if (file == nullptr || *file == '\0') {
        return "GPUPOOL_TEST_PG_URL_FILE is not set (run the tests through ctest, whose fixture `postgres` "
               "starts a server with tests/pg/pg_server.sh)";
    }
    const fs::path url_file(file);
    if (fs::exists(url_file)) {
        return std::nullopt;
    }
    const std::string missing = trimmed(slurp(url_file.parent_path() / "missing"));
    if (!missing.empty()) {
        return missing;
    }
    return "no PostgreSQL test server: " + url_file.string() + " does not exist (did the fixture `postgres` run?)";
}

std::optional<std::string> pg_server_url() {
    if (pg_unavailable()) {
        return std::nullopt;
    }
    return trimmed(slurp(std::getenv("GPUPOOL_TEST_PG_URL_FILE")));
}

std::optional<std::string> test_pg_url() {
    if (auto why = pg_unavailable()) {
        if (postgres_required()) {
            FAIL("no PostgreSQL for this test and GPUPOOL_REQUIRE_POSTGRES=1: " << *why);
        }
        WARN("skipped: " << *why);
        return std::nullopt;
    }
    return pg_server_url();
}

std::string database_url(const std::string& server_url, const std::string& database) {
    const auto authority = server_url.find("://");
    const auto slash = server_url.find('/', authority == std::string::npos ? 0 : authority + 3);
    if (slash == std::string::npos) {
        return server_url + "/" + database;
    }
    const auto query = server_url.find('?', slash);
    return server_url.substr(0, slash + 1) + database +
           (query == std::string::npos ? std::string() : server_url.substr(query));
}

std::string fresh_database(const std::string& name, const std::string& server_url) {
    auto c = connect(server_url);
    const std::string id = quoted_identifier(c.get(), name);
    pg_exec(server_url, "DROP DATABASE IF EXISTS " + id + " WITH (FORCE)");
    pg_exec(server_url, "CREATE DATABASE " + id);
    return database_url(server_url, name);
}

std::string ensure_database(const std::string& name, const std::string& server_url) {
    auto c = connect(server_url);
    const char* values[] = {name.c_str()};
    std::unique_ptr<PGresult, Clear> r(
        PQexecParams(c.get(), "SELECT 1 FROM pg_database WHERE datname = $1", 1, nullptr, values, nullptr, nullptr, 0));
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
        throw std::runtime_error(std::string("cannot list databases: ") + PQerrorMessage(c.get()));
    }
    if (PQntuples(r.get()) == 0) {
        pg_exec(server_url, "CREATE DATABASE " + quoted_identifier(c.get(), name));
    }
    return database_url(server_url, name);
}

std::string database_name_for(const fs::path& dir) {
    std::ostringstream name;
    name << "t_" << std::hex << std::setw(16) << std::setfill('0') << std::hash<std::string>{}(dir.string());
    return name.str();
}

void pg_exec(const std::string& url, const std::string& sql) {
    auto c = connect(url);
    std::unique_ptr<PGresult, Clear> r(PQexec(c.get(), sql.c_str()));
    const auto status = PQresultStatus(r.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
        throw std::runtime_error("`" + sql + "` failed: " + PQerrorMessage(c.get()));
    }
}

std::string pg_query_value(const std::string& url, const std::string& sql) {
    auto c = connect(url);
    std::unique_ptr<PGresult, Clear> r(PQexec(c.get(), sql.c_str()));
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
        throw std::runtime_error("`" + sql + "` failed: " + PQerrorMessage(c.get()));
    }
    return PQntuples(r.get()) > 0 ? PQgetvalue(r.get(), 0, 0) : "";
}

std::vector<std::vector<std::string>> pg_query_rows(const std::string& url, const std::string& sql) {
    auto c = connect(url);
    std::unique_ptr<PGresult, Clear> r(PQexec(c.get(), sql.c_str()));
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
        throw std::runtime_error("`" + sql + "` failed: " + PQerrorMessage(c.get()));
    }
    std::vector<std::vector<std::string>> rows(static_cast<std::size_t>(PQntuples(r.get())));
    for (int i = 0; i < PQntuples(r.get()); ++i) {
        for (int col = 0; col < PQnfields(r.get()); ++col) {
            rows[static_cast<std::size_t>(i)].emplace_back(PQgetvalue(r.get(), i, col));
        }
    }
    return rows;
}

OwnPgServer::OwnPgServer(fs::path dir) : m_dir(std::move(dir)) {}

OwnPgServer::~OwnPgServer() {
    script("stop");
}

int OwnPgServer::script(const std::string& command) {
    const fs::path sh = source_dir() / "tests" / "pg" / "pg_server.sh";
    return std::system(("'" + sh.string() + "' " + command + " '" + m_dir.string() + "'").c_str());
}

bool OwnPgServer::start() {
    if (script("start") != 0) {
        return false;
    }
    m_url = trimmed(slurp(m_dir / "url"));
    return !m_url.empty();
}

void OwnPgServer::crash() {
    script("crash");
}

} // namespace gpupool::test

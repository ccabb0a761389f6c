// The tests' PostgreSQL: the server the ctest fixture `postgres` starts (tests/pg/pg_server.sh; the
// file GPUPOOL_TEST_PG_URL_FILE names holds its URL), a database of a test's own on it, and servers
// a test starts itself to crash and start again.
//
// Without a server (PostgreSQL not installed, or the test run outside ctest), a test that asks for
// one is skipped with a warning that names what is missing; under GPUPOOL_REQUIRE_POSTGRES=1 (CI) it
// fails instead. Set-up failures (a statement the server refuses) throw std::runtime_error.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::test {

// Why there is no test server, or nullopt when there is one (no Catch macros: any thread or process).
std::optional<std::string> pg_unavailable();
// The test server's URL (its `postgres` database), or nullopt when pg_unavailable().
std::optional<std::string> pg_server_url();
// For a test case: the server's URL, or nullopt after WARNing why the test is skipped (FAIL under
// GPUPOOL_REQUIRE_POSTGRES=1).
std::optional<std::string> test_pg_url();
bool postgres_required();

// `server_url` with its database replaced by `database`.
std::string database_url(const std::string& server_url, const std::string& database);
// Drops database `name` (if any) and creates it empty; returns its URL.
std::string fresh_database(const std::string& name, const std::string& server_url);
// Creates database `name` unless it exists; returns its URL.
std::string ensure_database(const std::string& name, const std::string& server_url);
// A database name for a test directory ("t_" and a hash of the path).
std::string database_name_for(const std::filesystem::path& dir);

// Runs `sql` (one or more statements) as the server's superuser; throws when the server refuses it.
void pg_exec(const std::string& url, const std::string& sql);
// The first column of the first row of `sql` ("" when there is none).
std::string pg_query_value(const std::string& url, const std::string& sql);
// Every row of `sql`, each column as text ("" for NULL).
std::vector<std::vector<std::string>> pg_query_rows(const std::string& url, const std::string& sql);

// A PostgreSQL server of one test's own under `dir` (pg_server.sh), stopped and deleted when it goes.
class OwnPgServer {
public:
    explicit OwnPgServer(std::filesystem::path dir);
    ~OwnPgServer();
    OwnPgServer(const OwnPgServer&) = delete;
    OwnPgServer& operator=(const OwnPgServer&) = delete;
    bool start(); // false when it could not start (the reason is printed)
    void crash(); // pg_ctl stop -m immediate: in-flight work is lost, committed work must not be
    const std::string& url() const { return m_url; }

private:
    int script(const std::string& command);
    std::filesystem::path m_dir;
    std::string m_url;
};

} // namespace gpupool::test

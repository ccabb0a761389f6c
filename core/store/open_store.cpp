#include "core/store/open_store.hpp"

#include "core/store/sqlite_store.hpp"
#ifdef GPUPOOL_HAVE_POSTGRES
#include "core/store/postgres_store.hpp"

#include <libpq-fe.h>
#endif

#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>
#include <cctype>

namespace gpupool::store {

namespace {

constexpr std::string_view k_sqlite_prefix = "sqlite:";

// The scheme of `SCHEME://...` (RFC 3986 letters), or empty when `spec` has none.
std::string_view url_scheme(std::string_view spec) {
    const auto end = spec.find("://");
    if (end == std::string_view::npos || end == 0) {
        return {};
    }
    const std::string_view scheme = spec.substr(0, end);
    const bool well_formed =
        std::isalpha(static_cast<unsigned char>(scheme.front())) != 0 &&
        std::all_of(scheme.begin(), scheme.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '+' || c == '-' || c == '.';
        });
    return well_formed ? scheme : std::string_view{};
}

#ifdef GPUPOOL_HAVE_POSTGRES
// What libpq's own parser (PQconninfoParse, the one PQconnectdb uses) reads in a PostgreSQL URL: an
// error for a URL it cannot read, else whether a password is in it, in any of the forms libpq takes
// (`user:password@`, `?password=`, percent-encoded or not).
Result<bool> url_has_password(const std::string& url) {
    char* why = nullptr;
    PQconninfoOption* options = PQconninfoParse(url.c_str(), &why);
    if (options == nullptr) {
        std::string message = why != nullptr ? why : "out of memory";
        PQfreemem(why);
        while (!message.empty() && message.back() == '\n') {
            message.pop_back();
        }
        return make_error(ErrorCode::invalid_input, "libpq cannot read this URL: " + message, "--db");
    }
    bool found = false;
    for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
        found = found || (std::string_view(o->keyword) == "password" && o->val != nullptr && *o->val != '\0');
    }
    PQconninfoFree(options);
    return found;
}
#endif

} // namespace

bool postgres_available() {
#ifdef GPUPOOL_HAVE_POSTGRES
    return true;
#else
    return false;
#endif
}

std::string printable_spec(std::string_view spec) {
    const std::string_view scheme = url_scheme(spec);
    if (scheme != "postgresql" && scheme != "postgres") {
        return std::string(spec);
    }
#ifdef GPUPOOL_HAVE_POSTGRES
    if (auto has = url_has_password(std::string(spec)); has && !*has) {
        return std::string(spec);
    }
#endif
    return std::string(scheme) + "://(a URL that may hold a password, not shown)";
}

Result<StoreSpec> parse_store_spec(std::string_view spec) {
    if (spec.starts_with(k_sqlite_prefix)) {
        spec.remove_prefix(k_sqlite_prefix.size());
        if (spec.empty()) {
            return make_error(ErrorCode::invalid_input, "expected a file after `sqlite:`, like sqlite:pool.db", "--db");
        }
        return StoreSpec{Engine::sqlite, std::string(spec)};
    }
    const std::string_view scheme = url_scheme(spec);
    if (scheme == "postgresql" || scheme == "postgres") {
        if (!postgres_available()) {
            return make_error(ErrorCode::not_implemented,
                              "this gpupool was built without PostgreSQL (the static build is for workers); run "
                              "the coordinator from a build with libpq, or use a SQLite file",
                              "--db");
        }
#ifdef GPUPOOL_HAVE_POSTGRES
        auto has_password = url_has_password(std::string(spec));
        if (!has_password) {
            return has_password.error();
        }
        if (*has_password) {
            return make_error(ErrorCode::invalid_input,
                              "the URL carries a password, which every user of this machine can read on the "
                              "command line; put it in a file (--db-password-file), PGPASSWORD or ~/.pgpass",
                              "--db");
        }
#endif
        return StoreSpec{Engine::postgresql, std::string(spec)};
    }
    if (!scheme.empty()) {
        return make_error(ErrorCode::invalid_input,
                          "unknown store scheme `" + std::string(scheme) +
                              "`; expected a SQLite file (a path or sqlite:PATH)",
                          "--db");
    }
    if (spec.empty()) {
        return make_error(ErrorCode::invalid_input, "expected a SQLite file (a path or sqlite:PATH)", "--db");
    }
    return StoreSpec{Engine::sqlite, std::string(spec)};
}

Result<std::unique_ptr<Store>> open_store(const StoreSpec& spec, const OpenOptions& options) {
    switch (spec.engine) {
    case Engine::sqlite: {
        SqliteOptions so;
        so.lock = options.lock;
        so.create = options.create;
        so.checkpoint_delay = options.sqlite_checkpoint_delay;
        auto store = SqliteStore::open(spec.location, so);
        if (!store) {
            return store.error();
        }
        return std::unique_ptr<Store>(std::move(*store));
    }
    case Engine::postgresql: {
#ifdef GPUPOOL_HAVE_POSTGRES
        PostgresOptions po;
        po.create = options.create;
        po.password = options.password;
        auto store = PostgresStore::open(spec.location, po);
        if (!store) {
            return store.error();
        }
        return std::unique_ptr<Store>(std::move(*store));
#else
        break;
#endif
    }
    }
    return make_error(ErrorCode::not_implemented, "this gpupool was built without PostgreSQL", "--db");
}

Result<std::unique_ptr<Store>> open_store(std::string_view spec, const OpenOptions& options) {
    auto parsed = parse_store_spec(spec);
    if (!parsed) {
        return parsed.error();
    }
    return open_store(*parsed, options);
}

Result<int> check_backup_file(const std::filesystem::path& file) {
    try {
        SQLite::Database db(file.string(), SQLite::OPEN_READONLY);
        const std::string integrity = db.execAndGet("PRAGMA integrity_check").getString();
        if (integrity != "ok") {
            return make_error(ErrorCode::invalid_input, "`" + file.string() + "` is damaged: " + integrity);
        }
        const int version = db.execAndGet("PRAGMA user_version").getInt();
        if (version < 1 || version > k_schema_version) {
            return make_error(ErrorCode::invalid_input, "`" + file.string() + "` has schema version " +
                                                            std::to_string(version) +
                                                            ", not a pool this gpupool reads");
        }
        return version;
    } catch (const std::exception& e) {
        return make_error(ErrorCode::invalid_input,
                          "`" + file.string() + "` is not a readable pool database: " + e.what());
    }
}

} // namespace gpupool::store

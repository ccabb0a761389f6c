#include "core/store/open_store.hpp"

#include "core/store/sqlite_store.hpp"

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

} // namespace

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
        return make_error(ErrorCode::not_implemented,
                          "PostgreSQL stores are not supported yet; use a SQLite file (a path or sqlite:PATH)",
                          "--db");
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
        so.lock = true;
        so.create = options.create;
        auto store = SqliteStore::open(spec.location, so);
        if (!store) {
            return store.error();
        }
        return std::unique_ptr<Store>(std::move(*store));
    }
    case Engine::postgresql:
        break;
    }
    return make_error(ErrorCode::not_implemented, "PostgreSQL stores are not supported yet", "--db");
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

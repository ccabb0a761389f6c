#include "worker/install/installer.hpp"

#include "core/config/client_config.hpp"
#include "worker/install/install_files.hpp"

#include <optional>

namespace gpupool::worker {

namespace fs = std::filesystem;

namespace {

const std::string k_unit(k_service_unit_name);

using Planned = PlannedFile;

// What differs between two [pool] tables, key by key, for a refusal.
std::string pool_differences(const PoolTable& have, const PoolTable& want) {
    std::string out;
    auto add = [&out](const char* key, const std::string& a, const std::string& b) {
        if (a != b) {
            out += std::string(out.empty() ? "" : ", ") + key + " is `" + a + "`, install would write `" + b + "`";
        }
    };
    add("coordinator", have.coordinator, want.coordinator);
    add("token_file", have.token_file.string(), want.token_file.string());
    add("work_dir", have.work_dir.string(), want.work_dir.string());
    add("runtime", have.runtime, want.runtime);
    return out;
}

// Decides what happens to worker.toml; a conflict (without force) is returned as its reason.
Result<std::optional<std::string>> plan_config(const ServicePaths& paths, const PoolTable& pool, bool force,
                                               Planned& config) {
    auto existing = read_existing(paths.on_disk(paths.config));
    if (!existing) {
        return existing.error();
    }
    config.text = render_pool_config(pool);
    if (!*existing) {
        return std::optional<std::string>{};
    }
    const std::string file = paths.on_disk(paths.config).string();
    auto have = read_pool_table(**existing, file);
    if (have && *have == pool) {
        config.what = "unchanged";
        config.text = **existing;
        return std::optional<std::string>{};
    }
    if (!force) {
        return std::optional<std::string>(paths.config.string() + ": " +
                                          (have ? pool_differences(*have, pool)
                                                : "does not parse (" + have.error().describe() + ")"));
    }
    config.what = "replaced";
    if (have) {
        auto merged = merge_pool_config(**existing, file, pool);
        if (!merged) {
            return merged.error();
        }
        config.text = *merged;
        config.note = "[pool] updated, the file's other settings kept";
    } else {
        config.note = "the old file did not parse: replaced whole";
    }
    return std::optional<std::string>{};
}

// Notes a systemctl call made (its Status already in hand) in the report.
Status noted(ServiceReport& report, const std::string& line, Status st) {
    report.systemctl.push_back(line);
    return st;
}

Result<std::vector<Planned>> plan_install(const InstallOptions& o, const PoolTable& pool) {
    auto token = config::read_token_file(o.token_source, "--token-file");
    if (!token) {
        return token.error();
    }
    auto unit = render_unit(o.paths, pool, UnitInputs{o.binary, o.drain_grace});
    if (!unit) {
        return unit.error();
    }
    std::vector<Planned> files(3);
    files[0].path = o.paths.token;
    files[0].text = *token + "\n";
    files[0].note = "the enrollment token, 0600";
    files[1].path = o.paths.config;
    files[1].mode = k_mode_0644;
    files[2].path = o.paths.unit;
    files[2].text = *unit;
    files[2].mode = k_mode_0644;
    files[2].note = "runs " + o.binary.string() + " worker --share";
    std::vector<std::string> conflicts;
    for (std::size_t i = 0; i < files.size(); ++i) {
        auto c = i == 1 ? plan_config(o.paths, pool, o.force, files[i]) : plan_owned(o.paths.root, o.force, files[i]);
        if (!c) {
            return c.error();
        }
        if (*c) {
            conflicts.push_back(**c);
        }
    }
    if (!conflicts.empty()) {
        std::string message = "an earlier install left different settings (nothing was changed; --force replaces "
                              "them): ";
        for (std::size_t i = 0; i < conflicts.size(); ++i) {
            message += (i > 0 ? "; " : "") + conflicts[i];
        }
        return make_error(ErrorCode::conflict, message, "--force");
    }
    return files;
}

} // namespace

Status install_service(const InstallOptions& o, Systemctl& systemctl, ServiceReport& report) {
    PoolTable pool;
    pool.coordinator = o.coordinator;
    pool.token_file = o.paths.token;
    pool.work_dir = o.work_dir.empty() ? o.paths.work_dir : o.work_dir;
    pool.runtime = o.runtime;
    if (auto st = check_pool_table(pool); !st) {
        return st;
    }
    auto files = plan_install(o, pool);
    if (!files) {
        return files.error();
    }
    bool unit_changed = false;
    bool replaced = false;
    for (const auto& f : *files) {
        if (f.what != "unchanged") {
            if (auto st = write_planned(o.paths.root, f); !st) {
                return st;
            }
        }
        unit_changed = unit_changed || (f.path == o.paths.unit && f.what != "unchanged");
        replaced = replaced || f.what == "replaced";
        report.steps.push_back({f.what, f.path.string(), f.note});
    }
    const fs::path work = o.paths.on_disk(pool.work_dir);
    std::error_code ec;
    if (!fs::exists(work, ec)) {
        fs::create_directories(work, ec);
        if (!ec) {
            fs::permissions(work, fs::perms::owner_all, ec);
        }
        if (ec) {
            return make_error(ErrorCode::io, "cannot create the work dir `" + work.string() + "`: " + ec.message());
        }
        report.steps.push_back({"created", pool.work_dir.string(), "the work dir, 0700"});
    } else {
        report.steps.push_back({"kept", pool.work_dir.string(), "the work dir"});
    }
    if (unit_changed) {
        if (auto st = noted(report, "daemon-reload", systemctl.daemon_reload()); !st) {
            return st;
        }
    }
    if (replaced) {
        if (auto st = noted(report, "try-restart " + k_unit, systemctl.try_restart(k_unit)); !st) {
            return st;
        }
    }
    return noted(report, "enable --now " + k_unit, systemctl.enable_start(k_unit));
}

namespace {

// The work dir the installed config names (or the default), and whether purge may remove it.
fs::path installed_work_dir(const ServicePaths& paths) {
    auto existing = read_existing(paths.on_disk(paths.config));
    if (existing && *existing) {
        auto pool = read_pool_table(**existing, paths.on_disk(paths.config).string());
        if (pool && fs::path(pool->work_dir).is_absolute()) {
            return pool->work_dir.lexically_normal();
        }
    }
    return paths.work_dir;
}

Status check_purge(const ServicePaths& paths, const fs::path& work) {
    const fs::path on_disk = paths.on_disk(work);
    std::error_code ec;
    const bool looks_like_spool = work == paths.work_dir || fs::exists(on_disk / "worker.json", ec) ||
                                  !fs::exists(on_disk, ec) || fs::is_empty(on_disk, ec);
    const fs::path relative = work.relative_path();
    const auto depth = std::distance(relative.begin(), relative.end());
    if (!looks_like_spool || depth < 2) {
        return make_error(ErrorCode::invalid_input,
                          "`" + work.string() +
                              "` (the work dir worker.toml names) is not the default work dir and holds no "
                              "worker.json: remove it yourself if it is the spool; nothing was changed",
                          "--purge");
    }
    return {};
}

void remove_file(const ServicePaths& paths, const fs::path& p, ServiceReport& report) {
    std::error_code ec;
    const bool removed = fs::remove(paths.on_disk(p), ec);
    report.steps.push_back({removed ? "removed" : "absent", p.string(), ec ? ec.message() : ""});
}

} // namespace

Status uninstall_service(const UninstallOptions& o, Systemctl& systemctl, ServiceReport& report) {
    const ServicePaths& paths = o.paths;
    const fs::path work = installed_work_dir(paths);
    if (o.purge) {
        if (auto st = check_purge(paths, work); !st) {
            return st;
        }
    }
    std::error_code ec;
    const bool has_unit = fs::exists(fs::symlink_status(paths.on_disk(paths.unit), ec));
    if (has_unit) {
        if (auto st = noted(report, "disable --now " + k_unit, systemctl.stop_disable(k_unit)); !st) {
            return st;
        }
    }
    remove_file(paths, paths.unit, report);
    if (has_unit) {
        if (auto st = noted(report, "daemon-reload", systemctl.daemon_reload()); !st) {
            return st;
        }
    }
    remove_file(paths, paths.config, report);
    remove_file(paths, paths.token, report);
    const fs::path config_dir = paths.on_disk(paths.config).parent_path();
    if (fs::is_directory(config_dir, ec) && fs::is_empty(config_dir, ec)) {
        fs::remove(config_dir, ec);
    }
    if (!o.purge) {
        report.steps.push_back({"kept", work.string(), "the work dir (spool and identity); --purge removes it"});
        return {};
    }
    const auto n = fs::remove_all(paths.on_disk(work), ec);
    if (ec) {
        return make_error(ErrorCode::io, "cannot remove `" + paths.on_disk(work).string() + "`: " + ec.message());
    }
    report.steps.push_back({n > 0 ? "removed" : "absent", work.string(), "the work dir"});
    return {};
}

} // namespace gpupool::worker

// A real coordinator on a SQLite file with a manual clock, set up for credit scenarios: an admin,
// team "fellows" (no hardware) with a member, team "owners" with one L4 worker.
#pragma once

#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "core/store/sqlite_store.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

namespace gpupool::test::credit_pool {

using namespace gpupool::coordinator;
using credits::Account;

inline constexpr std::int64_t k_credit = credits::k_micro_per_credit;

// Half an L4 (1 credit per GPU-hour) for at most an hour: a hold of 0.5 credits.
inline recipe::JobSpec half_l4(const std::string& name, std::int64_t max_runtime_s = 3600) {
    recipe::JobSpec s;
    s.name = name;
    s.image = "busybox";
    s.command = {"true"};
    s.resources.gpus = 1;
    s.resources.gpu_milli = 500;
    s.resources.cpu_milli = 1000;
    s.resources.memory_mib = 1024;
    s.resources.max_runtime_s = max_runtime_s;
    return s;
}

inline api::Inventory l4_box() {
    api::Inventory inv;
    inv.cpu_milli = 8000;
    inv.memory_mib = 32768;
    inv.gpus.push_back({0, "NVIDIA L4", 24576, "", ""});
    return inv;
}

// An admin; team "fellows" (no hardware) with a member; team "owners" with one L4 worker.
struct CreditPool {
    test::TempDir dir;
    util::ManualClock clock;
    std::unique_ptr<store::SqliteStore> db;
    std::unique_ptr<Coordinator> coord;
    CoordinatorOptions options;
    Principal admin;
    Principal fellow;
    Principal owner_worker;
    std::vector<std::string> warnings;

    // `settle_ms`: how long owners' earnings settle before they are paid out.
    explicit CreditPool(bool enforce = true, std::int64_t fee_ppm = 0, std::int64_t settle_ms = 0) {
        options.lease_ms = 10'000;
        options.worker_timeout_ms = 10'000;
        options.credits.enforce = enforce;
        options.credits.pool_fee_ppm = fee_ppm;
        options.credits.settle_ms = settle_ms;
        REQUIRE(open());
        admin = coord->authenticate(init_admin(*coord).value().secret).value();
        REQUIRE(create_team(*coord, admin, "fellows", 1));
        REQUIRE(create_team(*coord, admin, "owners", 1));
        fellow = coord->authenticate(create_token(*coord, admin, store::Role::member, "fellows", "f").value().secret)
                     .value();
        auto enroll = create_token(*coord, admin, store::Role::enroll, "owners", "e").value();
        auto reg = coordinator::register_worker(*coord, coord->authenticate(enroll.secret).value(), "l4-box", l4_box());
        REQUIRE(reg);
        warnings = reg->warnings;
        owner_worker = coord->authenticate(reg->secret).value();
    }

    Status open() {
        db = store::SqliteStore::open(dir.path() / "pool.db").value();
        coord = std::make_unique<Coordinator>(*db, clock, options);
        return coord->start();
    }

    Status restart() {
        coord.reset();
        db.reset();
        return open();
    }

    std::int64_t balance(const std::string& team) const {
        const std::int64_t id = team == "fellows" ? 1 : 2;
        return coord->credit_desk().ledger().balance(Account::of_team(id));
    }

    JobId submit(recipe::JobSpec spec, bool allow_unfunded = false) {
        auto r = coordinator::submit(*coord, fellow,
                                     SubmitRequest{"train.toml", 0, {std::move(spec)}, std::nullopt, allow_unfunded});
        REQUIRE(r);
        return r->jobs.front();
    }

    // Ticks; returns the attempt placed on the worker (started), if any.
    std::optional<AttemptId> place_and_start() {
        REQUIRE(coordinator::heartbeat(*coord, owner_worker, {}));
        coord->tick();
        auto a = coordinator::assignments(*coord, owner_worker).value();
        if (a.empty()) {
            return std::nullopt;
        }
        REQUIRE(coordinator::start_attempt(*coord, owner_worker, a.front().attempt));
        return a.front().attempt;
    }

    void check_books() const {
        const auto& l = coord->credit_desk().ledger();
        CHECK(l.total() == 0);
        std::map<Account, std::int64_t> from_rows;
        for (const auto& e : l.entries()) {
            from_rows[e.debit] -= e.amount;
            from_rows[e.credit] += e.amount;
        }
        CHECK_FALSE(l.verify(from_rows));
    }
};


} // namespace gpupool::test::credit_pool

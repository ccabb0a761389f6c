// The audit log: who did which admin action, when. Each action is appended in the same
// transaction as the change it records, so the log and the pool never disagree.
//
// Actions: team.create, token.create, token.revoke, token.first_admin, token.recover_admin,
// worker.drain, worker.activate, worker.ban, credits.grant, credits.adjust, budget.team,
// budget.member, pool.backup, pool.restore (written by restore_pool into the restored copy).
#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/internal.hpp"

namespace gpupool::coordinator {

using namespace detail;
using namespace gpupool::store;

void Coordinator::audit(std::optional<TokenId> actor, std::string action, std::string target, std::string detail_json,
                        Changes& changes) const {
    AuditRecord a;
    a.at_ms = m_clock.now_ms();
    a.actor = actor;
    a.action = std::move(action);
    a.target = std::move(target);
    a.detail = std::move(detail_json);
    changes.audit.push_back(std::move(a));
}

Result<std::vector<AuditRecord>> Coordinator::audit_log(const Principal& who, const AuditQuery& query) {
    if (who.role != Role::admin) {
        return denied("only admins read the audit log");
    }
    if (query.limit < 1 || query.limit > 10'000) {
        return invalid("a page of the audit log holds 1 to 10000 records", "limit");
    }
    return m_store.read_audit(query);
}

} // namespace gpupool::coordinator

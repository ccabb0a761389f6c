// Authentication: who may call the coordinator, as what. The records and their rules are the
// TokenBook's (token_book.hpp); an admin's operations on teams and tokens are admin_ops.hpp's.
#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/internal.hpp"

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

Result<Principal> Coordinator::authenticate(std::string_view bearer_secret) const {
    if (bearer_secret.empty()) {
        return make_error(ErrorCode::unauthorized, "missing token: send `Authorization: Bearer <token>`");
    }
    const TokenRecord* t = m_tokens.live_token(bearer_secret);
    if (t == nullptr) {
        return make_error(ErrorCode::unauthorized, "unknown or revoked token");
    }
    if (t->worker && m_roster.banned(*t->worker)) {
        return make_error(ErrorCode::forbidden, "this worker is banned from the pool");
    }
    m_tokens.note_used(t->id, m_clock.now_ms());
    return Principal{t->role, t->team, t->worker, t->id};
}

} // namespace gpupool::coordinator

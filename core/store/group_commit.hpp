// GroupCommit: many writes, one commit (one fsync).
//
// A store whose engine can nest its transactions implements this beside Store (SqliteStore does; a
// caller finds it with dynamic_cast). Between begin_group() and end_group() every write call of the
// Store keeps its own all-or-nothing contract (a failed call leaves nothing of itself behind, a
// successful one is visible to later calls), but none of them is durable until end_group() succeeds:
// it commits them all at once. When end_group() fails, or the process dies first, none of them was
// written. So a caller that acknowledges a write only after end_group() keeps "acknowledged means
// durable" while many writes share one commit: the coordinator's service opens a group for the
// requests queued on its thread and answers them after it ends (service_group.cpp).
//
// Same thread rules as the Store it belongs to. Failures are Errors with ErrorCode::io.
#pragma once

#include "core/util/result.hpp"

namespace gpupool::store {

class GroupCommit {
public:
    virtual ~GroupCommit() = default;

    // Starts a group. A conflict when one is open already.
    virtual Status begin_group() = 0;
    // Commits every write since begin_group(), durably. On failure none of them is stored (they are
    // rolled back) and the group is over all the same. A conflict when no group is open.
    virtual Status end_group() = 0;
    // Rolls every write of the open group back (nothing happens when none is open).
    virtual void abandon_group() = 0;
    virtual bool group_open() const = 0;
};

} // namespace gpupool::store

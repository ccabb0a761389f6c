// Distinct identifier types for the pool's entities: JobId, AttemptId, WorkerId, TeamId, SweepId and
// TokenId. They live here, below every layer that names them (the scheduler, the store, the
// coordinator, the client), so that no lower layer has to reach up into sched/ for them.
//
// Each is a TaggedId<Tag> wrapping a 64-bit integer, so a WorkerId cannot be passed where a JobId is
// expected (the compiler refuses), while copying and comparing stay as cheap as for the integer.
// Construction is explicit; value() gives the raw number for storage and printing. Value types,
// safe to share between threads.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace gpupool {

template <class Tag>
class TaggedId {
public:
    constexpr TaggedId() = default;
    constexpr explicit TaggedId(std::int64_t value) : m_value(value) {}
    constexpr std::int64_t value() const { return m_value; }
    constexpr auto operator<=>(const TaggedId&) const = default;

private:
    std::int64_t m_value = 0;
};

using JobId = TaggedId<struct JobTag>;
using AttemptId = TaggedId<struct AttemptTag>;
using WorkerId = TaggedId<struct WorkerTag>;
using TeamId = TaggedId<struct TeamTag>;
using SweepId = TaggedId<struct SweepTag>;
using TokenId = TaggedId<struct TokenTag>;

} // namespace gpupool

template <class Tag>
struct std::hash<gpupool::TaggedId<Tag>> {
    std::size_t operator()(const gpupool::TaggedId<Tag>& id) const noexcept {
        return std::hash<std::int64_t>{}(id.value());
    }
};

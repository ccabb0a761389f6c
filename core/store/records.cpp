// The records' own helpers: their names as stored and shown, and which states are final.
#include "core/store/records.hpp"

#include <array>
#include <cstddef>

namespace gpupool::store {

namespace {

template <class E, std::size_t N>
std::optional<E> enum_from(std::string_view s, const std::array<const char*, N>& names) {
    for (std::size_t i = 0; i < N; ++i) {
        if (s == names[i]) {
            return static_cast<E>(i);
        }
    }
    return std::nullopt;
}

constexpr std::array<const char*, 4> k_role_names{"admin", "member", "worker", "enroll"};
constexpr std::array<const char*, 6> k_job_state_names{"queued", "assigned", "running", "succeeded", "failed",
                                                       "cancelled"};
constexpr std::array<const char*, 7> k_attempt_state_names{"assigned", "running", "succeeded", "failed",
                                                           "cancelled", "lost",    "preempted"};
constexpr std::array<const char*, 4> k_worker_state_names{"active", "draining", "banned", "quarantined"};

} // namespace

const char* to_string(Role r) { return k_role_names.at(static_cast<std::size_t>(r)); }
const char* to_string(JobState s) { return k_job_state_names.at(static_cast<std::size_t>(s)); }
const char* to_string(AttemptState s) { return k_attempt_state_names.at(static_cast<std::size_t>(s)); }
const char* to_string(WorkerState s) { return k_worker_state_names.at(static_cast<std::size_t>(s)); }
std::optional<Role> role_from_string(std::string_view s) { return enum_from<Role>(s, k_role_names); }
std::optional<JobState> job_state_from_string(std::string_view s) { return enum_from<JobState>(s, k_job_state_names); }
std::optional<AttemptState> attempt_state_from_string(std::string_view s) {
    return enum_from<AttemptState>(s, k_attempt_state_names);
}
std::optional<WorkerState> worker_state_from_string(std::string_view s) {
    return enum_from<WorkerState>(s, k_worker_state_names);
}

bool is_terminal(JobState s) {
    return s == JobState::succeeded || s == JobState::failed || s == JobState::cancelled;
}

bool is_terminal(AttemptState s) { return s != AttemptState::assigned && s != AttemptState::running; }

} // namespace gpupool::store

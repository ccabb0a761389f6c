#include "worker/gpu/memory_watchdog.hpp"

#include <map>

namespace gpupool::worker {

WatchdogVerdict check_gpu_memory(const std::vector<WatchedAttempt>& attempts, const std::vector<GpuUse>& uses,
                                 std::int64_t tolerance_per_mille) {
    WatchdogVerdict v;
    std::map<std::int64_t, std::vector<const WatchedAttempt*>> on_gpu;
    std::map<std::int64_t, const WatchedAttempt*> by_id;
    for (const auto& a : attempts) {
        on_gpu[a.gpu_index].push_back(&a);
        by_id[a.attempt] = &a;
    }
    std::map<std::int64_t, std::int64_t> used; // by attempt
    for (const auto& u : uses) {
        if (u.attempt && by_id.count(*u.attempt)) {
            used[*u.attempt] += u.used_mib;
            continue;
        }
        auto g = on_gpu.find(u.gpu_index);
        if (g != on_gpu.end() && g->second.size() == 1) {
            used[g->second.front()->attempt] += u.used_mib;
            continue;
        }
        if (g != on_gpu.end()) {
            v.unattributed.push_back(u);
        }
    }
    for (const auto& a : attempts) {
        if (a.limit_mib <= 0) {
            continue;
        }
        const auto it = used.find(a.attempt);
        const std::int64_t u = it == used.end() ? 0 : it->second;
        if (u * 1000 > a.limit_mib * (1000 + tolerance_per_mille)) {
            v.over.push_back({a.attempt, u, a.limit_mib});
        }
    }
    return v;
}

} // namespace gpupool::worker

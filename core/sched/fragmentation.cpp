#include "core/sched/fragmentation.hpp"

#include <algorithm>
#include <cassert>
#include <map>

namespace gpupool::sched {

Workload typical_workload(const std::vector<JobRequest>& jobs, int popularity_pct) {
    std::map<WorkloadType, std::int64_t> counts;
    std::int64_t total = 0;
    for (const auto& j : jobs) {
        if (j.gpus > 0 && j.gpu_milli == 0) {
            continue;
        }
        WorkloadType t{j.cpu_milli, j.gpus, j.gpus > 0 ? j.gpu_milli : 0, j.gpu_models, 0};
        ++counts[t];
        ++total;
    }
    std::vector<WorkloadType> types;
    types.reserve(counts.size());
    for (const auto& [t, c] : counts) {
        WorkloadType w = t;
        w.count = c;
        types.push_back(w);
    }
    auto key = [](const WorkloadType& t) { return std::tuple(t.count, t.cpu_milli, t.gpu_milli, t.gpus, t.models); };
    std::sort(types.begin(), types.end(),
              [&](const WorkloadType& a, const WorkloadType& b) { return key(a) > key(b); });

    Workload w;
    const std::int64_t needed = total * popularity_pct; // compare in percent units, exactly
    std::int64_t cumulative = 0;
    for (const auto& t : types) {
        if (cumulative * 100 >= needed) {
            break;
        }
        w.types.push_back(t);
        cumulative += t.count;
    }
    w.total_count = cumulative;
    return w;
}

namespace {

std::int64_t type_fragment_given_total(std::int64_t cpu_free, std::span<const GpuSlot> gpus, const WorkloadType& type,
                                       std::int64_t total) {
    if (type.gpus == 0 || cpu_free < type.cpu_milli) {
        return total;
    }
    std::int64_t usable = 0;
    std::int64_t usable_count = 0;
    for (const auto& g : gpus) {
        if (g.free >= type.gpu_milli && model_allowed(type.models, g.model)) {
            usable += g.free;
            ++usable_count;
        }
    }
    return usable_count >= type.gpus ? total - usable : total;
}

} // namespace

std::int64_t type_fragment(std::int64_t cpu_free, std::span<const GpuSlot> gpus, const WorkloadType& type) {
    std::int64_t total = 0;
    for (const auto& g : gpus) {
        total += g.free;
    }
    return type_fragment_given_total(cpu_free, gpus, type, total);
}

std::int64_t weighted_fragmentation(std::int64_t cpu_free, std::span<const GpuSlot> gpus, const Workload& workload) {
    std::int64_t total = 0;
    for (const auto& g : gpus) {
        total += g.free;
    }
    if (total == 0) {
        return 0;
    }
    std::int64_t sum = 0;
    for (const auto& t : workload.types) {
        sum += t.count * type_fragment_given_total(cpu_free, gpus, t, total);
    }
    return sum;
}

NodeFragmentation::NodeFragmentation(std::int64_t cpu_free, std::span<const GpuSlot> gpus, const Workload& workload)
    : m_cpu_free(cpu_free), m_gpus(gpus), m_workload(workload) {
    for (const auto& g : gpus) {
        m_total += g.free;
    }
    m_types.resize(workload.types.size());
    for (std::size_t t = 0; t < workload.types.size(); ++t) {
        const WorkloadType& type = workload.types[t];
        for (const auto& g : gpus) {
            if (g.free >= type.gpu_milli && model_allowed(type.models, g.model)) {
                m_types[t].usable_sum += g.free;
                ++m_types[t].usable_count;
            }
        }
    }
    m_before = m_total == 0 ? 0 : after(0, {}, 0);
}

std::int64_t NodeFragmentation::after(std::int64_t cpu, std::span<const std::uint32_t> gpus, std::int64_t milli) const {
    const std::int64_t total = m_total - milli * static_cast<std::int64_t>(gpus.size());
    if (total == 0) {
        return 0;
    }
    const std::int64_t cpu_free = m_cpu_free - cpu;
    std::int64_t sum = 0;
    for (std::size_t t = 0; t < m_workload.types.size(); ++t) {
        const WorkloadType& type = m_workload.types[t];
        std::int64_t frag = total;
        if (type.gpus > 0 && cpu_free >= type.cpu_milli) {
            std::int64_t usable = m_types[t].usable_sum;
            std::int64_t count = m_types[t].usable_count;
            for (auto i : gpus) {
                const GpuSlot& g = m_gpus[i];
                const bool model_ok = model_allowed(type.models, g.model);
                const bool was = model_ok && g.free >= type.gpu_milli;
                const bool now = model_ok && g.free - milli >= type.gpu_milli;
                usable += (now ? g.free - milli : 0) - (was ? g.free : 0);
                count += (now ? 1 : 0) - (was ? 1 : 0);
            }
            if (count >= type.gpus) {
                frag = total - usable;
            }
        }
        sum += type.count * frag;
    }
    return sum;
}

std::size_t to_slots(const Worker& worker, std::array<GpuSlot, k_max_gpus_per_worker>& out) {
    assert(worker.gpus.size() <= k_max_gpus_per_worker);
    for (std::size_t i = 0; i < worker.gpus.size(); ++i) {
        out[i] = GpuSlot{worker.gpus[i].model, worker.gpus[i].milli_free};
    }
    return worker.gpus.size();
}

std::int64_t weighted_fragmentation(const Worker& worker, const Workload& workload) {
    std::array<GpuSlot, k_max_gpus_per_worker> slots{};
    std::size_t n = to_slots(worker, slots);
    return weighted_fragmentation(worker.cpu_milli_free, std::span<const GpuSlot>(slots.data(), n), workload);
}

double fragmentation_milli(const Worker& worker, const Workload& workload) {
    if (workload.total_count == 0) {
        return 0.0;
    }
    return static_cast<double>(weighted_fragmentation(worker, workload)) / static_cast<double>(workload.total_count);
}

} // namespace gpupool::sched

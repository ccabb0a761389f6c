// Small builders for hand-written clusters in the scheduler tests.
#pragma once

#include "core/sched/cluster.hpp"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace gpupool::sched::test {

// A worker with `frees` as the free milli-GPU of each GPU (model 0, 16 GiB each).
inline Worker worker(std::int64_t id, std::initializer_list<std::int64_t> frees, std::int64_t cpu_free = 32000,
                     std::int64_t mem_free = 131072, std::uint32_t model = 0, std::int64_t gpu_memory_mib = 16384) {
    Worker w;
    w.id = WorkerId(id);
    w.name = "w" + std::to_string(id);
    w.cpu_milli_total = 32000;
    w.cpu_milli_free = cpu_free;
    w.memory_mib_total = 131072;
    w.memory_mib_free = mem_free;
    for (auto f : frees) {
        w.gpus.push_back(Gpu{model, gpu_memory_mib, f});
    }
    return w;
}

inline JobRequest share_job(std::int64_t id, std::int64_t milli, std::int64_t cpu = 1000, std::int64_t mem = 1024) {
    JobRequest j;
    j.id = JobId(id);
    j.team = TeamId(1);
    j.gpus = 1;
    j.gpu_milli = milli;
    j.cpu_milli = cpu;
    j.memory_mib = mem;
    return j;
}

inline JobRequest whole_job(std::int64_t id, std::int64_t gpus, std::int64_t cpu = 1000, std::int64_t mem = 1024) {
    JobRequest j = share_job(id, k_milli_per_gpu, cpu, mem);
    j.gpus = gpus;
    return j;
}

inline JobRequest cpu_job(std::int64_t id, std::int64_t cpu, std::int64_t mem = 1024) {
    JobRequest j;
    j.id = JobId(id);
    j.team = TeamId(1);
    j.cpu_milli = cpu;
    j.memory_mib = mem;
    return j;
}

} // namespace gpupool::sched::test

// Reading cluster traces in the format of Alibaba's GPU-sharing trace (cluster-trace-gpu-v2023):
// a node list, a pod list, and the FGD paper's published results. See ../shared/data/README.md.
//
// Columns are found by name in the header, so extra columns are ignored and the order may vary.
// The files have no quoting; a line is split on commas. Failures are Errors: a missing file is
// ErrorCode::not_found naming the path, a malformed line is invalid_input with file and line.
// Pure functions apart from reading the named file; thread-safe.
#pragma once

#include "core/util/result.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace gpupool::sim {

struct TraceNode {
    std::string name;
    std::int64_t cpu_milli = 0;
    std::int64_t memory_mib = 0;
    std::int64_t gpus = 0;
    std::string model;
};

struct TracePod {
    std::string name;
    std::int64_t cpu_milli = 0;
    std::int64_t memory_mib = 0;
    std::int64_t num_gpu = 0;
    std::int64_t gpu_milli = 0;        // per GPU
    std::vector<std::string> gpu_spec; // acceptable models; empty = any
    std::string qos;
    std::int64_t creation_time = 0;
    std::int64_t deletion_time = 0;
    std::int64_t scheduled_time = 0;
};

// One row of fgd_published_alloc.csv.
struct PublishedResult {
    std::string workload; // e.g. openb_pod_list_default
    std::string policy;   // e.g. 06-FGD
    std::int64_t total_gpus = 0;
    std::vector<double> alloc_pct; // at arrived 50, 60, ..., 130 %
    double sd_at_130 = 0.0;
    double unallocated_gpus_at_130 = 0.0;
    double frag_pct_at_100 = 0.0;
};

Result<std::vector<TraceNode>> load_nodes(const std::filesystem::path& file);
Result<std::vector<TracePod>> load_pods(const std::filesystem::path& file);
Result<std::vector<PublishedResult>> load_published(const std::filesystem::path& file);

// "06-FGD" -> "fgd", "05-BestFit" -> "bestfit", "04-GpuPacking" -> "packing", "01-Random" -> "random";
// other policies keep their lower-cased name without the number.
std::string policy_key(const std::string& published_policy);

} // namespace gpupool::sim

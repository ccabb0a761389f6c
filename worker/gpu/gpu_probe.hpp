// GPU discovery on a worker machine.
//
// GpuProbe exists so that the worker's logic can be tested on machines without GPUs: the real
// probe asks the NVIDIA driver (through `nvidia-smi`'s CSV query interface), tests hand the worker
// a fixed inventory. A machine without the driver is not an error: it has no GPUs and the worker
// offers CPU-only slots. A driver that is present but answers garbage is an Error.
// Implementations are stateless and thread-safe.
#pragma once

#include "core/util/result.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::worker {

struct GpuInfo {
    int index = 0;
    std::string uuid;
    std::string name;  // as the driver reports it, e.g. "NVIDIA H200"
    std::string model; // normalized for the catalog, e.g. "H200"
    std::int64_t memory_mib = 0;
    bool operator==(const GpuInfo&) const = default;
};

class GpuProbe {
public:
    virtual ~GpuProbe() = default;
    virtual Result<std::vector<GpuInfo>> list() = 0;
};

// Runs `nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits`.
class NvidiaSmiProbe final : public GpuProbe {
public:
    Result<std::vector<GpuInfo>> list() override;
};

// A fixed inventory, for tests and for `--fake-gpus` in local experiments.
class StaticGpuProbe final : public GpuProbe {
public:
    explicit StaticGpuProbe(std::vector<GpuInfo> gpus) : m_gpus(std::move(gpus)) {}
    Result<std::vector<GpuInfo>> list() override { return m_gpus; }

private:
    std::vector<GpuInfo> m_gpus;
};

// Parses nvidia-smi's CSV answer (the query above). Pure.
Result<std::vector<GpuInfo>> parse_nvidia_smi_csv(std::string_view text);

// "NVIDIA GeForce RTX 4090" -> "RTX-4090"; "NVIDIA H100 80GB HBM3" -> "H100-80GB-HBM3".
std::string normalize_gpu_model(std::string_view driver_name);

} // namespace gpupool::worker

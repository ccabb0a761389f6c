// GPU discovery on a worker machine.
//
// GpuProbe exists so that the worker's logic can be tested on machines without GPUs: the real
// probe asks the NVIDIA driver (through `nvidia-smi`'s CSV query interface), tests hand the worker
// a fixed inventory. A machine without the driver is not an error: it has no GPUs and the worker
// offers CPU-only slots. A driver that is present but answers garbage is an Error.
// Implementations are stateless and thread-safe.
#pragma once

#include "core/util/result.hpp"
#include "core/util/thread_safety.hpp"
#include "worker/gpu/idle_guard.hpp" // GpuActivity

#include <chrono>
#include <cstdint>
#include <optional>
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

// The driver's versions, as the run report states them (core/api/run_report.hpp): empty when not known.
struct DriverInfo {
    std::string driver_version; // e.g. "550.54.15"
    std::string cuda_version;   // the highest CUDA version the driver supports, e.g. "12.4"
    bool operator==(const DriverInfo&) const = default;
};

// A process using GPU memory, as the driver accounts it.
struct GpuProcess {
    std::int64_t pid = 0;
    std::string gpu_uuid;
    std::int64_t used_mib = 0;
    bool operator==(const GpuProcess&) const = default;
};

// What the driver says of one GPU's health now.
struct GpuStatus {
    std::string uuid;
    std::optional<std::int64_t> ecc_uncorrected; // since the driver loaded; nullopt where not supported
    bool operator==(const GpuStatus&) const = default;
};

// A GPU that should take no work now, and why (sent in the worker's heartbeat).
struct UnhealthyGpu {
    int index = 0;
    std::string reason;
    bool operator==(const UnhealthyGpu&) const = default;
};

// Which of the worker's GPUs are unhealthy, given the driver's answer now. Pure. Rules: a driver
// that does not answer makes every GPU unhealthy; a GPU the driver no longer lists has fallen off
// the bus (or was taken away); one with uncorrectable ECC errors gives wrong answers.
std::vector<UnhealthyGpu> assess_gpu_health(const std::vector<GpuInfo>& gpus, const Result<std::vector<GpuStatus>>& now);

// How a GPU's memory shares are enforced on this machine (reported in the worker's inventory,
// strongest first): "mps" when the worker runs its own MPS control daemon (`worker --mps`: the driver
// caps each client, and the watchdog still watches), "watchdog" when the driver's per-process
// accounting answers (the worker stops a job that exceeds its share), "none" when nothing can (no
// driver, or one that cannot say which process holds what).
enum class MemoryEnforcement : std::uint8_t { none, watchdog, mps };
const char* to_string(MemoryEnforcement m);

class GpuProbe {
public:
    virtual ~GpuProbe() = default;
    virtual Result<std::vector<GpuInfo>> list() = 0;
    // Compute processes and the GPU memory each holds (empty without a driver).
    virtual Result<std::vector<GpuProcess>> processes() { return std::vector<GpuProcess>{}; }
    virtual MemoryEnforcement memory_enforcement() { return MemoryEnforcement::none; }
    // Each GPU the driver sees now; an Error when the driver does not answer.
    virtual Result<std::vector<GpuStatus>> status() { return std::vector<GpuStatus>{}; }
    // What each GPU and, where the driver can say, each process is doing now (for the idle guard).
    virtual Result<GpuActivity> activity() { return GpuActivity{}; }
    // The driver's versions (asked once, when the worker starts). Default: not known.
    virtual Result<DriverInfo> driver() { return DriverInfo{}; }
};

// Runs `nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits`.
// Processes: `nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits`.
// Every call is bounded by `timeout`: a wedged GPU can leave nvidia-smi hanging, and the worker
// must go on heartbeating (a call past it is an Error, and health() then calls every GPU unhealthy).
class NvidiaSmiProbe final : public GpuProbe {
public:
    explicit NvidiaSmiProbe(std::chrono::milliseconds timeout = std::chrono::seconds(10)) : m_timeout(timeout) {}
    Result<std::vector<GpuInfo>> list() override;
    Result<std::vector<GpuProcess>> processes() override;
    MemoryEnforcement memory_enforcement() override;
    // `nvidia-smi --query-gpu=uuid,ecc.errors.uncorrected.volatile.total --format=csv,noheader,nounits`
    Result<std::vector<GpuStatus>> status() override;
    // `nvidia-smi --query-gpu=uuid,utilization.gpu,utilization.memory --format=csv,noheader,nounits`, then
    // per process `nvidia-smi pmon -c 1 -s u` (processes nullopt when that fails: some GPUs and
    // drivers do not support it).
    Result<GpuActivity> activity() override;
    // `nvidia-smi --query-gpu=driver_version --format=csv,noheader` (an Error when it fails), then the
    // "CUDA Version" of `nvidia-smi --version`, else of the `nvidia-smi` table's header (no --query-gpu
    // field names it; unknown when neither says); nothing known without a driver.
    Result<DriverInfo> driver() override;

private:
    std::chrono::milliseconds m_timeout;
};

// A fixed inventory, for tests and for `--fake-gpus` in local experiments.
// Thread-safe: tests change the processes while the agent reads them.
class StaticGpuProbe final : public GpuProbe {
public:
    explicit StaticGpuProbe(std::vector<GpuInfo> gpus, DriverInfo driver = {})
        : m_gpus(std::move(gpus)), m_driver(std::move(driver)) {}
    StaticGpuProbe(const StaticGpuProbe& o) : m_gpus(o.m_gpus), m_driver(o.m_driver), m_processes(o.processes_now()) {}
    Result<std::vector<GpuInfo>> list() override { return m_gpus; }
    Result<DriverInfo> driver() override { return m_driver; }
    Result<std::vector<GpuProcess>> processes() override {
        util::MutexLock lock(m_mu);
        ++m_process_queries;
        return m_processes;
    }
    MemoryEnforcement memory_enforcement() override {
        return m_gpus.empty() ? MemoryEnforcement::none : MemoryEnforcement::watchdog;
    }
    void set_processes(std::vector<GpuProcess> p) {
        util::MutexLock lock(m_mu);
        m_processes = std::move(p);
    }
    // How many times processes() was asked (a test waits for the watchdog to have looked).
    std::int64_t process_queries() const {
        util::MutexLock lock(m_mu);
        return m_process_queries;
    }
    // Every GPU present without ECC errors, unless a test says otherwise.
    Result<std::vector<GpuStatus>> status() override {
        util::MutexLock lock(m_mu);
        ++m_status_queries;
        if (m_status) {
            return *m_status;
        }
        std::vector<GpuStatus> out;
        for (const auto& g : m_gpus) {
            out.push_back({g.uuid, 0});
        }
        return out;
    }
    void set_status(std::optional<Result<std::vector<GpuStatus>>> s) {
        util::MutexLock lock(m_mu);
        m_status = std::move(s);
    }
    // How many times status() was asked.
    std::int64_t status_queries() const {
        util::MutexLock lock(m_mu);
        return m_status_queries;
    }
    // Every GPU at 0 % with no per-process figures, unless a test says otherwise.
    Result<GpuActivity> activity() override {
        util::MutexLock lock(m_mu);
        if (m_activity) {
            return *m_activity;
        }
        GpuActivity a;
        for (const auto& g : m_gpus) {
            a.gpus.push_back({g.uuid, 0, 0});
        }
        return a;
    }
    void set_activity(std::optional<Result<GpuActivity>> a) {
        util::MutexLock lock(m_mu);
        m_activity = std::move(a);
    }

private:
    std::vector<GpuProcess> processes_now() const {
        util::MutexLock lock(m_mu);
        return m_processes;
    }

    const std::vector<GpuInfo> m_gpus;
    const DriverInfo m_driver;
    mutable util::Mutex m_mu;
    std::vector<GpuProcess> m_processes GUARDED_BY(m_mu);
    std::optional<Result<std::vector<GpuStatus>>> m_status GUARDED_BY(m_mu);
    std::optional<Result<GpuActivity>> m_activity GUARDED_BY(m_mu);
    std::int64_t m_process_queries GUARDED_BY(m_mu) = 0;
    std::int64_t m_status_queries GUARDED_BY(m_mu) = 0;
};

// Parses nvidia-smi's CSV answer (the query above). Pure.
Result<std::vector<GpuInfo>> parse_nvidia_smi_csv(std::string_view text);

// Parses the compute-apps query above. Pure. "[N/A]" memory (some drivers in containers) reads 0.
Result<std::vector<GpuProcess>> parse_compute_apps_csv(std::string_view text);

// Parses the utilisation query above. Pure. "[N/A]" reads as 0.
Result<std::vector<GpuUtilisation>> parse_gpu_utilisation_csv(std::string_view text);

// Parses `nvidia-smi pmon -c 1 -s u`: the first `#` line names the columns (gpu, pid, sm, mem are
// needed; drivers add others), `-` reads as 0, rows without a pid are skipped. Pure.
Result<std::vector<ProcessActivity>> parse_pmon(std::string_view text);

// Parses the status query above. Pure. "[N/A]" or "[Not Supported]" ECC counts read as nullopt.
Result<std::vector<GpuStatus>> parse_gpu_status_csv(std::string_view text);

// The driver_version query above: the first line's version (every GPU has the same driver). Pure.
// A version is 1 to 32 digits and dots, starting with a digit; anything else is an Error (io).
Result<std::string> parse_driver_version(std::string_view text);

// The "CUDA Version: 12.4" of `nvidia-smi`'s header (or of `nvidia-smi -q`'s "CUDA Version : 12.4");
// empty when no line says it, an Error (io) when one does with something that is not a version. Pure.
Result<std::string> parse_cuda_version(std::string_view text);

// "NVIDIA GeForce RTX 4090" -> "RTX-4090"; "NVIDIA H100 80GB HBM3" -> "H100-80GB-HBM3".
std::string normalize_gpu_model(std::string_view driver_name);

} // namespace gpupool::worker

#include "worker/gpu/gpu_probe.hpp"

#include "core/util/strings.hpp"

#include "worker/runtime/bounded_run.hpp"

#include <boost/process/search_path.hpp>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

namespace gpupool::worker {

namespace bp = boost::process;

namespace {

using util::trim;

template <class T>
bool parse_int(std::string_view s, T& out) {
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && ptr == s.data() + s.size();
}

std::vector<std::string_view> split_columns(std::string_view line) {
    std::vector<std::string_view> cols;
    std::size_t start = 0;
    while (true) {
        std::size_t comma = line.find(',', start);
        cols.push_back(trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
        if (comma == std::string_view::npos) {
            return cols;
        }
        start = comma + 1;
    }
}

// Calls `row(cols, bad)` for each non-empty line of nvidia-smi's CSV answer after checking it has
// `columns` columns; `bad(why)` makes the Error naming the answer, the line and its text.
template <class Row>
Status for_each_row(std::string_view text, const std::string& what, std::size_t columns, const std::string& names,
                    Row row) {
    std::size_t line_no = 0;
    while (!text.empty()) {
        std::size_t nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
        ++line_no;
        if (trim(line).empty()) {
            continue;
        }
        auto bad = [&](const std::string& why) {
            return make_error(ErrorCode::io,
                              what + " line " + std::to_string(line_no) + ": " + why + ": `" + std::string(line) + "`");
        };
        auto cols = split_columns(line);
        if (cols.size() != columns) {
            return bad("expected " + std::to_string(columns) + " columns (" + names + ")");
        }
        if (auto st = row(cols, bad); !st) {
            return st;
        }
    }
    return {};
}

// Runs nvidia-smi with `args` for at most `timeout`; the text it printed (empty, with `present`
// false, when there is no nvidia-smi).
Result<std::string> run_nvidia_smi(const std::vector<std::string>& args, std::chrono::milliseconds timeout,
                                   bool& present) {
    auto exe = bp::search_path("nvidia-smi");
    present = !exe.empty();
    if (!present) {
        return std::string();
    }
    BoundedRunOptions options;
    options.timeout = timeout;
    auto run = run_bounded(exe.string(), args, options);
    if (!run) {
        return run.error();
    }
    if (run->timed_out) {
        return make_error(ErrorCode::io, "nvidia-smi did not answer within " + std::to_string(timeout.count()) +
                                             " ms (a GPU or the driver may be hung)");
    }
    if (run->exit_code != 0) {
        return make_error(ErrorCode::io, "nvidia-smi exited with status " + std::to_string(run->exit_code) +
                                             "; is the NVIDIA driver loaded?");
    }
    return std::move(run->out);
}

} // namespace

const char* to_string(MemoryEnforcement m) {
    switch (m) {
    case MemoryEnforcement::none: return "none";
    case MemoryEnforcement::watchdog: return "watchdog";
    case MemoryEnforcement::mps: return "mps";
    }
    return "none";
}

Result<std::vector<GpuProcess>> parse_compute_apps_csv(std::string_view text) {
    std::vector<GpuProcess> out;
    auto st = for_each_row(text, "nvidia-smi compute-apps", 3, "pid, gpu_uuid, used_memory",
                           [&](const std::vector<std::string_view>& cols, const auto& bad) -> Status {
                               GpuProcess p;
                               if (!parse_int(cols[0], p.pid) || p.pid <= 0) {
                                   return bad("pid is not a positive number");
                               }
                               p.gpu_uuid = std::string(cols[1]);
                               if (!parse_int(cols[2], p.used_mib)) {
                                   p.used_mib = 0; // "[N/A]"
                               }
                               out.push_back(std::move(p));
                               return {};
                           });
    if (!st) {
        return st.error();
    }
    return out;
}

Result<std::vector<GpuProcess>> NvidiaSmiProbe::processes() {
    bool present = false;
    auto text = run_nvidia_smi({"--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits"},
                               m_timeout, present);
    if (!text) {
        return text.error();
    }
    return parse_compute_apps_csv(*text);
}

Result<std::vector<GpuStatus>> parse_gpu_status_csv(std::string_view text) {
    std::vector<GpuStatus> out;
    auto st = for_each_row(text, "nvidia-smi GPU status", 2, "uuid, ecc.errors.uncorrected.volatile.total",
                           [&](const std::vector<std::string_view>& cols, const auto& bad) -> Status {
                               GpuStatus s;
                               s.uuid = std::string(cols[0]);
                               if (s.uuid.empty()) {
                                   return bad("uuid is empty");
                               }
                               std::int64_t n = 0;
                               if (parse_int(cols[1], n) && n >= 0) {
                                   s.ecc_uncorrected = n;
                               } else if (!cols[1].starts_with("[") && cols[1] != "N/A") {
                                   return bad("the ECC count is neither a number nor [N/A]");
                               }
                               out.push_back(std::move(s));
                               return {};
                           });
    if (!st) {
        return st.error();
    }
    return out;
}

std::vector<UnhealthyGpu> assess_gpu_health(const std::vector<GpuInfo>& gpus, const Result<std::vector<GpuStatus>>& now) {
    std::vector<UnhealthyGpu> out;
    for (const auto& g : gpus) {
        if (!now) {
            out.push_back({g.index, "the NVIDIA driver does not answer (" + now.error().message + ")"});
            continue;
        }
        auto s = std::find_if(now->begin(), now->end(), [&](const GpuStatus& x) { return x.uuid == g.uuid; });
        if (s == now->end()) {
            out.push_back({g.index, "the driver no longer lists it (" + g.uuid + "): fallen off the bus, or removed"});
        } else if (s->ecc_uncorrected && *s->ecc_uncorrected > 0) {
            out.push_back({g.index, std::to_string(*s->ecc_uncorrected) +
                                        " uncorrectable ECC error(s) since the driver loaded; a reset or reboot clears "
                                        "them"});
        }
    }
    return out;
}

Result<std::vector<GpuStatus>> NvidiaSmiProbe::status() {
    bool present = false;
    auto text = run_nvidia_smi({"--query-gpu=uuid,ecc.errors.uncorrected.volatile.total", "--format=csv,noheader,nounits"},
                               m_timeout, present);
    if (!text) {
        return text.error();
    }
    if (!present) {
        return make_error(ErrorCode::io, "nvidia-smi is gone");
    }
    return parse_gpu_status_csv(*text);
}

MemoryEnforcement NvidiaSmiProbe::memory_enforcement() {
    // The watchdog needs the driver's per-process accounting; MPS is the agent's to add (`--mps`): a
    // daemon some other program runs is not one the worker's containers can reach.
    if (bp::search_path("nvidia-smi").empty()) {
        return MemoryEnforcement::none;
    }
    return processes() ? MemoryEnforcement::watchdog : MemoryEnforcement::none;
}

Result<std::vector<GpuUtilisation>> parse_gpu_utilisation_csv(std::string_view text) {
    std::vector<GpuUtilisation> out;
    auto st = for_each_row(text, "nvidia-smi utilisation", 3, "uuid, utilization.gpu, utilization.memory",
                           [&](const std::vector<std::string_view>& cols, const auto& bad) -> Status {
                               GpuUtilisation u;
                               u.uuid = std::string(cols[0]);
                               if (u.uuid.empty()) {
                                   return bad("uuid is empty");
                               }
                               if (!parse_int(cols[1], u.util_pct)) {
                                   u.util_pct = 0; // "[N/A]"
                               }
                               if (!parse_int(cols[2], u.mem_util_pct)) {
                                   u.mem_util_pct = 0;
                               }
                               if (u.util_pct < 0 || u.util_pct > 100 || u.mem_util_pct < 0 || u.mem_util_pct > 100) {
                                   return bad("a utilisation outside 0..100");
                               }
                               out.push_back(std::move(u));
                               return {};
                           });
    if (!st) {
        return st.error();
    }
    return out;
}

Result<std::vector<ProcessActivity>> parse_pmon(std::string_view text) {
    std::vector<std::string> names;
    std::vector<ProcessActivity> out;
    std::istringstream in{std::string(text)};
    std::string line;
    std::size_t line_no = 0;
    auto column = [&](const char* name) {
        return static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin());
    };
    while (std::getline(in, line)) {
        ++line_no;
        std::istringstream words(line);
        std::vector<std::string> cols{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
        if (cols.empty()) {
            continue;
        }
        if (cols.front() == "#") {
            if (names.empty()) {
                names.assign(cols.begin() + 1, cols.end()); // "# gpu pid type sm mem ..."
            }
            continue;
        }
        const std::size_t gpu = column("gpu"), pid = column("pid"), sm = column("sm"), mem = column("mem");
        if (names.empty() || std::max({gpu, pid, sm, mem}) >= names.size()) {
            return make_error(ErrorCode::io, "nvidia-smi pmon: no header naming gpu, pid, sm and mem before line " +
                                                 std::to_string(line_no));
        }
        if (cols.size() < names.size() - (names.back() == "command" ? 1 : 0)) {
            return make_error(ErrorCode::io, "nvidia-smi pmon line " + std::to_string(line_no) + ": too few columns: `" +
                                                 line + "`");
        }
        ProcessActivity p;
        auto number = [](const std::string& v, std::int64_t& to) { return v == "-" || parse_int(std::string_view(v), to); };
        if (cols[pid] == "-") {
            continue; // a GPU with no process
        }
        if (!number(cols[gpu], p.gpu_index) || !number(cols[pid], p.pid) || !number(cols[sm], p.sm_pct) ||
            !number(cols[mem], p.mem_pct) || p.pid <= 0) {
            return make_error(ErrorCode::io, "nvidia-smi pmon line " + std::to_string(line_no) + ": not numbers: `" +
                                                 line + "`");
        }
        out.push_back(p);
    }
    return out;
}

Result<GpuActivity> NvidiaSmiProbe::activity() {
    bool present = false;
    auto text = run_nvidia_smi({"--query-gpu=uuid,utilization.gpu,utilization.memory", "--format=csv,noheader,nounits"},
                               m_timeout, present);
    if (!text) {
        return text.error();
    }
    if (!present) {
        return make_error(ErrorCode::io, "nvidia-smi is gone");
    }
    auto gpus = parse_gpu_utilisation_csv(*text);
    if (!gpus) {
        return gpus.error();
    }
    GpuActivity out;
    out.gpus = std::move(*gpus);
    if (auto pmon = run_nvidia_smi({"pmon", "-c", "1", "-s", "u"}, m_timeout, present); pmon && present) {
        if (auto procs = parse_pmon(*pmon)) {
            out.processes = std::move(*procs);
        }
    }
    return out;
}

namespace {

// 1 to 32 digits and dots, starting with a digit: "550.54.15", "12.4".
bool is_version(std::string_view v) {
    return !v.empty() && v.size() <= 32 && v.front() >= '0' && v.front() <= '9' &&
           std::all_of(v.begin(), v.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

} // namespace

Result<std::string> parse_driver_version(std::string_view text) {
    std::string_view first = trim(text.substr(0, text.find('\n')));
    if (!is_version(first)) {
        return make_error(ErrorCode::io,
                          "nvidia-smi driver_version: not a version: `" + std::string(first.substr(0, 64)) + "`");
    }
    return std::string(first);
}

Result<std::string> parse_cuda_version(std::string_view text) {
    constexpr std::string_view key = "CUDA Version";
    const auto at = text.find(key);
    if (at == std::string_view::npos) {
        return std::string();
    }
    std::string_view rest = text.substr(at + key.size());
    rest = trim(rest.substr(0, rest.find('\n')));
    if (!rest.starts_with(":")) {
        return make_error(ErrorCode::io, "nvidia-smi: no ':' after \"CUDA Version\"");
    }
    rest = trim(rest.substr(1));
    const std::string_view version = rest.substr(0, rest.find_first_of(" |\t"));
    if (!is_version(version)) {
        return make_error(ErrorCode::io, "nvidia-smi: \"CUDA Version\" is not a version: `" +
                                             std::string(version.substr(0, 64)) + "`");
    }
    return std::string(version);
}

Result<DriverInfo> NvidiaSmiProbe::driver() {
    bool present = false;
    auto text = run_nvidia_smi({"--query-gpu=driver_version", "--format=csv,noheader"}, m_timeout, present);
    if (!text) {
        return text.error();
    }
    if (!present) {
        return DriverInfo{}; // no driver: nothing to say
    }
    auto version = parse_driver_version(*text);
    if (!version) {
        return version.error();
    }
    DriverInfo out{std::move(*version), {}};
    // `--version` ("CUDA Version : 12.4"), else the table's header ("CUDA Version: 12.4"): a driver too
    // old for the one may still print the other. Neither: the CUDA version stays unknown.
    for (const std::vector<std::string>& args : {std::vector<std::string>{"--version"}, std::vector<std::string>{}}) {
        auto answer = run_nvidia_smi(args, m_timeout, present);
        auto cuda = answer ? parse_cuda_version(*answer) : Result<std::string>(answer.error());
        if (cuda && !cuda->empty()) {
            out.cuda_version = std::move(*cuda);
            break;
        }
    }
    return out;
}

std::string normalize_gpu_model(std::string_view driver_name) {
    std::string_view s = trim(driver_name);
    for (std::string_view prefix : {"NVIDIA ", "GeForce ", "Tesla ", "Quadro "}) {
        if (s.starts_with(prefix)) {
            s.remove_prefix(prefix.size());
        }
    }
    std::string out(s);
    for (char& c : out) {
        if (c == ' ') {
            c = '-';
        }
    }
    return out;
}

Result<std::vector<GpuInfo>> parse_nvidia_smi_csv(std::string_view text) {
    std::vector<GpuInfo> gpus;
    auto st = for_each_row(text, "nvidia-smi output", 4, "index, uuid, name, memory.total",
                           [&](const std::vector<std::string_view>& cols, const auto& bad) -> Status {
                               GpuInfo g;
                               if (!parse_int(cols[0], g.index)) {
                                   return bad("index is not a number");
                               }
                               g.uuid = std::string(cols[1]);
                               g.name = std::string(cols[2]);
                               g.model = normalize_gpu_model(g.name);
                               if (!parse_int(cols[3], g.memory_mib) || g.memory_mib <= 0) {
                                   return bad("memory.total is not a positive number of MiB");
                               }
                               gpus.push_back(std::move(g));
                               return {};
                           });
    if (!st) {
        return st.error();
    }
    return gpus;
}

Result<std::vector<GpuInfo>> NvidiaSmiProbe::list() {
    bool present = false;
    auto text = run_nvidia_smi({"--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader,nounits"}, m_timeout,
                               present);
    if (!text) {
        return text.error();
    }
    if (!present) {
        return std::vector<GpuInfo>{}; // no driver: a CPU-only machine
    }
    return parse_nvidia_smi_csv(*text);
}

} // namespace gpupool::worker

#include "worker/agent/process_owner.hpp"

#include "worker/runtime/process_runtime.hpp"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

namespace gpupool::worker {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t k_container_id_len = 64;
constexpr std::size_t k_max_proc_file = 64 * 1024; // a cgroup or stat file is far smaller
const std::string k_attempt_var = "GPUPOOL_ATTEMPT_ID=";

std::optional<std::string> read_small(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) {
        return std::nullopt;
    }
    std::string text(k_max_proc_file, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    if (in.bad()) {
        return std::nullopt;
    }
    text.resize(static_cast<std::size_t>(in.gcount()));
    return text;
}

bool is_hex(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

// The attempt its environment names, where the worker may read it.
std::optional<std::int64_t> attempt_in_environ(const fs::path& environ) {
    auto text = read_small(environ);
    if (!text) {
        return std::nullopt;
    }
    std::istringstream in(*text);
    for (std::string var; std::getline(in, var, '\0');) {
        if (var.rfind(k_attempt_var, 0) == 0) {
            try {
                return std::stoll(var.substr(k_attempt_var.size()));
            } catch (const std::exception&) {
                return std::nullopt;
            }
        }
    }
    return std::nullopt;
}

} // namespace

std::vector<JobMark> gpu_job_marks(const AttemptTable& attempts, ContainerRuntime& runtime) {
    std::vector<JobMark> jobs;
    for (const auto& [id, t] : attempts) {
        if (t.running() && t.a.gpu_index >= 0) {
            const auto m = runtime.process_marks(t.container);
            jobs.push_back({id.value(), t.a.gpu_index, m ? m->container_id : "", m ? m->session : 0});
        }
    }
    return jobs;
}

std::vector<std::string> cgroup_container_ids(std::string_view text) {
    std::vector<std::string> ids;
    std::size_t i = 0;
    while (i < text.size()) {
        if (!is_hex(text[i])) {
            ++i;
            continue;
        }
        std::size_t end = i;
        while (end < text.size() && is_hex(text[end])) {
            ++end;
        }
        if (end - i == k_container_id_len) {
            ids.emplace_back(text.substr(i, end - i));
        }
        i = end;
    }
    return ids;
}

ProcessOwner owner_of_process(const fs::path& proc_root, std::int64_t pid, const std::vector<JobMark>& jobs) {
    if (pid <= 0) {
        return ProcessOwner::unknown;
    }
    const fs::path dir = proc_root / std::to_string(pid);
    const auto cgroup = read_small(dir / "cgroup");
    const auto stat_text = read_small(dir / "stat");
    const auto stat = stat_text ? parse_proc_stat(*stat_text) : std::nullopt;
    if (!cgroup || !stat) {
        return ProcessOwner::unknown;
    }
    for (const auto& id : cgroup_container_ids(*cgroup)) {
        if (std::any_of(jobs.begin(), jobs.end(), [&](const JobMark& j) { return j.container_id == id; })) {
            return ProcessOwner::job;
        }
    }
    if (std::any_of(jobs.begin(), jobs.end(),
                    [&](const JobMark& j) { return j.session > 0 && j.session == stat->session; })) {
        return ProcessOwner::job;
    }
    if (const auto attempt = attempt_in_environ(dir / "environ");
        attempt && std::any_of(jobs.begin(), jobs.end(), [&](const JobMark& j) { return j.attempt == *attempt; })) {
        return ProcessOwner::job;
    }
    // "pid (comm) ...": comm is what the kernel keeps of the program's name (15 bytes at most).
    const auto open = stat_text->find('(');
    const auto close = stat_text->rfind(')');
    if (open != std::string::npos && close != std::string::npos && close > open &&
        std::string_view(*stat_text).substr(open + 1, close - open - 1).starts_with("nvidia-cuda-mps")) {
        return ProcessOwner::system;
    }
    return ProcessOwner::foreign;
}

} // namespace gpupool::worker

#include "worker/runtime/oci_argv.hpp"

#include "core/recipe/image_ref.hpp"

namespace gpupool::worker {

namespace {

constexpr const char* k_ulimit_nofile = "nofile=4096:4096";
constexpr const char* k_ulimit_nproc = "nproc=4096:4096";
constexpr const char* k_tmpfs = "/tmp:rw,nosuid,nodev,size=512m,mode=1777";

// 1500 milli-CPU -> "1.5"; 2000 -> "2".
std::string cpus_flag(std::int64_t milli) {
    std::string out = std::to_string(milli / 1000);
    std::int64_t frac = milli % 1000;
    if (frac != 0) {
        std::string digits = std::to_string(frac);
        digits.insert(0, 3 - digits.size(), '0');
        while (digits.back() == '0') {
            digits.pop_back();
        }
        out += "." + digits;
    }
    return out;
}

} // namespace

const char* to_string(OciTool tool) {
    return tool == OciTool::podman ? "podman" : "docker";
}

std::vector<std::string> build_run_argv(OciTool tool, const ContainerSpec& spec,
                                        const std::vector<std::string>& extra_run_args) {
    // Foreground: the CLI's exit is the container's; signals reach the job only through `kill`.
    std::vector<std::string> a{"run", "--name", spec.name, "--sig-proxy=false"};
    for (const auto& [key, value] : spec.labels) {
        a.insert(a.end(), {"--label", key + "=" + value});
    }
    // The engine's own log store is what `logs -f` replays after a reattach.
    a.insert(a.end(), {"--log-driver", tool == OciTool::podman ? "k8s-file" : "json-file"});
    a.insert(a.end(), {"--init", "--cap-drop=ALL", "--security-opt", "no-new-privileges", "--user", spec.user});
    if (spec.keep_user_id && tool == OciTool::podman) {
        a.push_back("--userns=keep-id");
    }
    if (spec.pids_limit > 0) {
        a.insert(a.end(), {"--pids-limit", std::to_string(spec.pids_limit)});
    }
    if (spec.memory_mib > 0) {
        std::string mem = std::to_string(spec.memory_mib) + "m";
        a.insert(a.end(), {"--memory", mem, "--memory-swap", mem});
    }
    if (spec.cpu_milli > 0) {
        a.insert(a.end(), {"--cpus", cpus_flag(spec.cpu_milli)});
    }
    a.insert(a.end(), {"--ulimit", k_ulimit_nofile, "--ulimit", k_ulimit_nproc});
    if (spec.read_only_root) {
        a.insert(a.end(), {"--read-only", "--tmpfs", k_tmpfs});
    }
    if (spec.host_ipc) {
        a.push_back("--ipc=host"); // an MPS client talks to the daemon over the host's shared memory
    }
    for (const Mount& m : spec.mounts) {
        a.insert(a.end(), {"-v", m.host.string() + ":" + m.container + (m.read_only ? ":ro" : "")});
    }
    for (const auto& [key, value] : spec.env) {
        a.insert(a.end(), {"-e", key + "=" + value});
    }
    if (!spec.workdir.empty()) {
        a.insert(a.end(), {"--workdir", spec.workdir.string()}); // else the image's, `/` for most
    }
    if (spec.gpu_index) {
        std::string index = std::to_string(*spec.gpu_index);
        if (tool == OciTool::podman) {
            a.insert(a.end(), {"--device", "nvidia.com/gpu=" + index});
        } else {
            a.insert(a.end(), {"--gpus", "device=" + index});
        }
    }
    a.insert(a.end(), extra_run_args.begin(), extra_run_args.end());
    // Options end here: whatever the image is, the engine cannot read it (or anything after it) as a flag.
    a.push_back("--");
    // Fully qualified, as the owner's registries were checked against: never a short name that the
    // engine would search registries for (podman's unqualified-search-registries). An invalid
    // reference, which start() refuses before this, goes as it is (still after `--`).
    a.push_back(recipe::validate_image_reference(spec.image) ? recipe::qualified_image(spec.image) : spec.image);
    a.insert(a.end(), spec.argv.begin(), spec.argv.end());
    return a;
}

} // namespace gpupool::worker

#include "worker/agent/job_container.hpp"

#include "core/resources/quantity.hpp"
#include "core/util/files.hpp"
#include "core/util/tree_fd.hpp"
#include "core/archive/archive.hpp"
#include "worker/gpu/mps_daemon.hpp"

#include <spdlog/spdlog.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <tuple>

namespace gpupool::worker {

namespace fs = std::filesystem;

namespace {

std::string fraction_text(std::int64_t milli) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(milli / 1000),
                  static_cast<long long>(milli % 1000));
    return buf;
}

std::string upper_env_name(const std::string& s) {
    std::string out;
    for (char c : s) {
        const auto u = static_cast<unsigned char>(c);
        out += std::isalnum(u) ? static_cast<char>(std::toupper(u)) : '_';
    }
    return out;
}

// The job's GPU, its share and the variables that tell the job about them.
// Where a container finds the worker's MPS pipe directory.
constexpr const char* k_mps_pipe_seen = "/run/gpupool-mps";

void set_gpu(ContainerSpec& c, const Attempt& t, const ContainerContext& ctx) {
    const auto& spec = t.a.spec;
    std::int64_t gpu_mem = 0;
    std::int64_t milli = 0;
    if (t.a.gpu_index >= 0) {
        c.gpu_index = t.a.gpu_index;
        milli = t.a.gpu_milli;
        const auto g = std::find_if(ctx.gpus.begin(), ctx.gpus.end(), [&](const GpuInfo& x) { return x.index == t.a.gpu_index; });
        const std::int64_t total = g != ctx.gpus.end() ? g->memory_mib : 0;
        gpu_mem = spec.resources.gpu_memory_mib > 0 ? spec.resources.gpu_memory_mib
                                                    : total * milli / resources::k_milli_per_gpu;
        if (milli == 0 && total > 0) {
            milli = resources::gpu_milli_for_memory(gpu_mem, total);
        }
        // Inside a container the one visible GPU is device 0; a bare process sees them all.
        c.env["CUDA_VISIBLE_DEVICES"] = ctx.runtime.gpu_as_device_zero ? "0" : std::to_string(t.a.gpu_index);
        c.env["NVIDIA_VISIBLE_DEVICES"] = std::to_string(t.a.gpu_index);
        if (milli < 1000 && gpu_mem > 0 && ctx.mps_pipe) {
            // A client of the worker's MPS daemon, capped by the driver (a whole GPU bypasses MPS).
            const bool host_paths = !ctx.runtime.isolates;
            const std::string pipe = host_paths ? ctx.mps_pipe->string() : std::string(k_mps_pipe_seen);
            // The daemon was started with the GPUs' UUIDs: a client names its GPU by UUID too (an index
            // would be read relative to the daemon's list), and is then its device 0.
            const bool by_uuid = g != ctx.gpus.end() && !g->uuid.empty();
            if (by_uuid) {
                c.env["CUDA_VISIBLE_DEVICES"] = g->uuid;
            }
            const int device = by_uuid || ctx.runtime.gpu_as_device_zero ? 0 : static_cast<int>(t.a.gpu_index);
            for (const auto& [k, v] : mps_client_env(milli, gpu_mem, device, pipe, ctx.mps_compute)) {
                c.env[k] = v;
            }
            if (!host_paths) {
                c.mounts.push_back({*ctx.mps_pipe, k_mps_pipe_seen, false});
                c.host_ipc = true;
            }
        }
    } else {
        c.env["CUDA_VISIBLE_DEVICES"] = "";
    }
    c.env["GPUPOOL_GPU_MEMORY_MB"] = std::to_string(gpu_mem);
    c.env["GPUPOOL_GPU_FRACTION"] = fraction_text(milli);
}

Result<std::string> input_archive(const Attempt& t, const fs::path& work_dir, CoordinatorLink& link) {
    const auto& in = t.a.spec.inputs;
    // Shipped through the coordinator; kept per digest, so a sweep downloads it once.
    const fs::path cached = work_dir / "inputs" / (in.archive + ".tar");
    std::error_code ec;
    if (fs::exists(cached, ec)) {
        std::ifstream f(cached, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(f), {});
    }
    auto got = link.inputs(t.a.attempt);
    if (!got) {
        return make_error(got.error().code == ErrorCode::invalid_input ? ErrorCode::io : got.error().code,
                          "fetching the job's inputs: " + got.error().message);
    }
    fs::create_directories(cached.parent_path(), ec);
    // 0600: another user of this machine has no business reading a team's inputs.
    if (auto st = util::write_private_file(cached, *got); !st) {
        spdlog::warn("cannot cache the inputs {}: {}", in.archive, st.error().message);
    }
    return got;
}

// Without an archive, inputs can only come from this machine's disk (shared file systems).
Status copy_local_inputs(const Attempt& t) {
    const auto& in = t.a.spec.inputs;
    std::error_code ec;
    for (std::size_t i = 0; i < in.resolved.size(); ++i) {
        const fs::path src = in.resolved[i];
        if (!fs::exists(src, ec)) {
            return make_error(ErrorCode::invalid_input,
                              "input `" + in.paths[i] + "` is not on this worker (" + src.string() +
                                  ") and the job carries no inputs archive",
                              "inputs");
        }
        const fs::path dst = t.dir / "work" / src.filename();
        fs::copy(src, dst, fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
        if (ec) {
            return make_error(ErrorCode::io, "copying input " + src.string() + ": " + ec.message());
        }
    }
    return {};
}

} // namespace

fs::path team_cache_dir(const fs::path& cache_dir, TeamId team) {
    return cache_dir / "teams" / std::to_string(team.value());
}

std::string exit_reason(const Attempt& t, const ExitStatus& st, bool runtime_limits_memory) {
    if (!t.stop_reason.empty()) {
        return t.stop_reason + " (exit " + std::to_string(st.exit_code) + ")";
    }
    const std::int64_t limit = t.a.spec.resources.memory_mib;
    if (st.oom_killed || (st.exit_code == 137 && limit > 0 && runtime_limits_memory)) {
        return "killed: out of memory (exit 137; memory limit " + std::to_string(limit) + " MiB)";
    }
    return "exited with status " + std::to_string(st.exit_code);
}

ContainerSpec container_spec_for(const Attempt& t, const ContainerContext& ctx) {
    const bool host_paths = !ctx.runtime.isolates;
    const auto& spec = t.a.spec;
    ContainerSpec c;
    c.name = "gpupool-" + ctx.worker_label + "-a" + std::to_string(t.a.attempt.value());
    c.image = spec.image;
    c.argv = spec.argv();
    c.log_path = t.log_path();
    c.cpu_milli = spec.resources.cpu_milli;
    c.memory_mib = spec.resources.memory_mib;
    if (ctx.runtime.isolates && ctx.worker_uid != 0) {
        c.user = std::to_string(ctx.worker_uid) + ":" + std::to_string(ctx.worker_gid);
        c.keep_user_id = true;
    }
    c.labels = {{"gpupool.worker", ctx.worker_label},
                {"gpupool.job", std::to_string(t.a.job.value())},
                {"gpupool.attempt", std::to_string(t.a.attempt.value())}};
    const fs::path team_cache = team_cache_dir(ctx.cache_dir, t.a.team);
    const fs::path work = host_paths ? t.dir / "work" : fs::path("/work");
    const fs::path outputs = host_paths ? t.dir / "outputs" : fs::path("/outputs");
    const fs::path cache = host_paths ? team_cache : fs::path("/team-cache");
    // Every runtime starts the job in its inputs folder: `sh job.sh` reading ./data.txt runs alike.
    c.workdir = work;
    c.mounts = {{t.dir / "work", "/work", true}, {t.dir / "outputs", "/outputs", false}, {team_cache, "/team-cache", false}};
    if (!ctx.model_cache.empty()) {
        c.mounts.push_back({ctx.model_cache, "/cache", true});
    }
    const fs::path models = host_paths ? ctx.model_cache : fs::path("/cache");
    for (const auto& [k, v] : spec.env) {
        c.env[k] = v;
    }
    c.env["GPUPOOL_JOB_ID"] = std::to_string(t.a.job.value());
    c.env["GPUPOOL_ATTEMPT"] = std::to_string(t.a.attempt_number);
    c.env["GPUPOOL_ATTEMPT_ID"] = std::to_string(t.a.attempt.value());
    c.env["GPUPOOL_JOB_NAME"] = spec.name;
    c.env["GPUPOOL_WORK_DIR"] = work.string();
    c.env["GPUPOOL_OUTPUT_DIR"] = outputs.string();
    c.env["GPUPOOL_CACHE_DIR"] = cache.string();
    c.env["HF_HOME"] = (cache / "huggingface").string();
    if (!ctx.model_cache.empty()) {
        c.env["GPUPOOL_MODEL_CACHE"] = models.string();
        if (ctx.models_ready && !spec.cache_models.empty()) {
            c.env["HF_HOME"] = models.string(); // read-only: everything it needs is there
            c.env["HF_HUB_OFFLINE"] = "1";
        }
    }
    c.env["HOME"] = "/tmp"; // a container's own tmpfs; the same name for a bare process
    for (const auto& [k, v] : spec.params) {
        c.env["GPUPOOL_PARAM_" + upper_env_name(k)] = v;
    }
    set_gpu(c, t, ctx);
    if (host_paths && !c.env.count("PATH")) {
        c.env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    }
    return c;
}

std::string report_text(std::string_view s) {
    std::string out(s.substr(0, api::k_max_report_text_bytes));
    for (char& c : out) {
        if (c < 0x20 || c > 0x7e) { // char is signed here: bytes over 0x7f are negative
            c = '?';
        }
    }
    return out;
}

api::RunReport run_report_for(const Attempt& t, const ContainerSpec& spec, const RunFacts& facts) {
    api::RunReport r;
    r.runtime = report_text(facts.runtime);
    r.worker_version = report_text(facts.worker_version);
    if (spec.gpu_index) {
        const auto g = std::find_if(facts.gpus.begin(), facts.gpus.end(),
                                    [&](const GpuInfo& x) { return x.index == *spec.gpu_index; });
        if (g != facts.gpus.end()) {
            r.gpu_model = report_text(g->model);
            r.gpu_uuid = report_text(g->uuid);
        }
        r.driver_version = report_text(facts.driver.driver_version);
        r.cuda_version = report_text(facts.driver.cuda_version);
        // What held the share: the driver (an MPS client), the watchdog (a fractional job where it looks:
        // gpu_watch.hpp), or nothing (a whole GPU, or a driver that cannot say who holds what).
        // A fractional job is an MPS client exactly when the worker runs its daemon (set_gpu); the
        // job's own environment, which may name MPS variables too, is not asked.
        const bool fractional = gpu_limit_mib(spec) > 0;
        r.enforcement = fractional && facts.mps                                      ? "mps"
                        : fractional && facts.enforcement != MemoryEnforcement::none ? "watchdog"
                                                                                     : "none";
    }
    for (const auto& m : t.a.spec.cache_models) {
        if (r.models.size() == api::k_max_report_models) {
            break;
        }
        const auto c = facts.model_commits.find(m);
        r.models.push_back({report_text(m), c != facts.model_commits.end() ? report_text(c->second) : std::string()});
    }
    return r;
}

std::int64_t gpu_limit_mib(const ContainerSpec& c) {
    if (!c.gpu_index || c.env.at("GPUPOOL_GPU_FRACTION") == "1.000") {
        return 0;
    }
    try {
        return std::stoll(c.env.at("GPUPOOL_GPU_MEMORY_MB"));
    } catch (const std::exception&) {
        return 0;
    }
}

std::optional<util::Owner> job_owner(bool isolates, uid_t worker_uid) {
    if (isolates && worker_uid == 0) {
        return util::Owner{k_job_uid, k_job_uid};
    }
    return std::nullopt;
}

Status prepare_attempt_dirs(const Attempt& t, const fs::path& work_dir, const fs::path& cache_dir, bool isolates,
                            CoordinatorLink& link) {
    // Every step below is by descriptor: outputs/ and the team's cache are the job's, and any name
    // in them may be a link a job planted to a host folder (util/tree_fd.hpp).
    const auto owner = job_owner(isolates, ::geteuid());
    const auto failed = [&](const fs::path& where, const Error& e) {
        return make_error(e.code == ErrorCode::invalid_input ? ErrorCode::io : e.code,
                          "cannot prepare " + where.string() + ": " + e.message);
    };
    auto attempt = util::open_dir(t.dir);
    if (!attempt) {
        return failed(t.dir, attempt.error());
    }
    auto work = util::make_dir_at(attempt->get(), "work", 0755, true);
    auto outputs = util::make_dir_at(attempt->get(), "outputs", 0700, true);
    if (!work || !outputs) {
        return failed(t.dir, (!work ? work : outputs).error());
    }
    const fs::path team_cache = team_cache_dir(cache_dir, t.a.team);
    auto cache = util::open_dir(cache_dir);
    auto teams = cache ? util::make_dir_at(cache->get(), "teams", 0700) : Result<util::UniqueFd>(cache.error());
    auto team = teams ? util::make_dir_at(teams->get(), team_cache.filename().string(), 0700)
                      : Result<util::UniqueFd>(teams.error());
    // The job may have put a link or a file where its Hugging Face folder was: only the name goes.
    auto hf = team ? util::make_dir_at(team->get(), "huggingface", 0700, true) : Result<util::UniqueFd>(team.error());
    if (!hf) {
        return failed(team_cache, hf.error());
    }
    if (!t.a.spec.inputs.archive.empty()) {
        auto bytes = input_archive(t, work_dir, link);
        if (!bytes) {
            return bytes.error();
        }
        auto unpacked = archive::unpack_archive(*bytes, t.dir / "work");
        if (!unpacked) {
            return make_error(ErrorCode::io, "unpacking the job's inputs: " + unpacked.error().message);
        }
        for (const auto& s : unpacked->skipped) {
            spdlog::warn("attempt {}: inputs: skipped {}", t.a.attempt.value(), s);
        }
    } else if (auto st = copy_local_inputs(t); !st) {
        return st;
    }
    // The job's user owns what it writes (0700): no folder of the job is ever open to everyone.
    for (auto [fd, mode, whose, name] : {std::tuple{work->get(), 0755, std::optional<util::Owner>(), "work"},
                                         std::tuple{outputs->get(), 0700, owner, "outputs"},
                                         std::tuple{team->get(), 0700, owner, "the team cache"},
                                         std::tuple{hf->get(), 0700, owner, "the team cache's huggingface"}}) {
        if (auto st = util::set_owner_and_mode(fd, whose, static_cast<mode_t>(mode), name); !st) {
            return failed(t.dir, st.error());
        }
    }
    return {};
}

} // namespace gpupool::worker

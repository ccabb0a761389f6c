#include "core/sched/cluster.hpp"

#include "core/recipe/image_ref.hpp"

#include <algorithm>

namespace gpupool::sched {

std::uint32_t ModelCatalog::intern(std::string_view name) {
    if (auto found = find(name)) {
        return *found;
    }
    if (full()) {
        return k_uncatalogued;
    }
    m_names.emplace_back(name);
    return static_cast<std::uint32_t>(m_names.size() - 1);
}

const std::string& ModelCatalog::name(std::uint32_t index) const {
    static const std::string uncatalogued = "(uncatalogued)";
    return index < m_names.size() ? m_names[index] : uncatalogued;
}

std::optional<std::uint32_t> ModelCatalog::find(std::string_view name) const {
    for (std::size_t i = 0; i < m_names.size(); ++i) {
        if (m_names[i] == name) {
            return static_cast<std::uint32_t>(i);
        }
    }
    return std::nullopt;
}

ModelMask ModelCatalog::mask(const std::vector<std::string>& names, std::vector<std::string>* unknown) const {
    ModelMask m = 0;
    for (const auto& n : names) {
        if (auto idx = find(n)) {
            m |= ModelMask{1} << *idx;
        } else if (unknown != nullptr) {
            unknown->push_back(n);
        }
    }
    return m;
}

JobRequest make_request(JobId id, TeamId team, const recipe::JobSpec& spec, std::int64_t submitted_at,
                        const ModelCatalog& catalog, std::vector<std::string>* unknown_models) {
    JobRequest r;
    r.id = id;
    r.team = team;
    r.priority = spec.priority;
    r.submitted_at = submitted_at;
    r.gpus = spec.resources.gpus;
    r.gpu_milli = spec.resources.gpu_milli;
    r.gpu_memory_mib = spec.resources.gpu_memory_mib;
    r.gpu_models = catalog.mask(spec.resources.gpu_models, unknown_models);
    r.cpu_milli = spec.resources.cpu_milli;
    r.memory_mib = spec.resources.memory_mib;
    r.image = spec.image;
    r.qualified_image = recipe::qualified_image(spec.image);
    r.cache_models = spec.cache_models;
    r.max_runtime_s = spec.resources.max_runtime_s;
    r.no_known_model = !spec.resources.gpu_models.empty() && r.gpu_models == 0;
    return r;
}

TermsRefusal refused_by(const WorkerTerms& terms, const JobRequest& job) {
    if (terms.teams && !std::binary_search(terms.teams->begin(), terms.teams->end(), job.team)) {
        return TermsRefusal::team;
    }
    if (!terms.registries.empty() &&
        std::none_of(terms.registries.begin(), terms.registries.end(),
                     [&](const std::string& prefix) { return job.qualified_image.starts_with(prefix); })) {
        return TermsRefusal::registry;
    }
    if (terms.max_runtime_s > 0 && (job.max_runtime_s <= 0 || job.max_runtime_s > terms.max_runtime_s)) {
        return TermsRefusal::max_runtime;
    }
    return TermsRefusal::none;
}

std::int64_t milli_on(const JobRequest& job, const Gpu& gpu) {
    if (job.gpus == 0) {
        return 0;
    }
    if (job.gpu_memory_mib > 0 && job.gpu_milli == 0) {
        if (gpu.memory_mib <= 0) {
            return k_milli_per_gpu + 1; // cannot fit
        }
        return resources::gpu_milli_for_memory(job.gpu_memory_mib, gpu.memory_mib);
    }
    return job.gpu_milli;
}

} // namespace gpupool::sched

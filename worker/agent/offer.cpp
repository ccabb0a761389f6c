#include "worker/agent/offer.hpp"

#include "core/resources/quantity.hpp"
#include "worker/agent/identity.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

namespace gpupool::worker {

namespace {

std::vector<api::CachedModelInfo> cached_models(const HubCache& models) {
    auto list = models.list();
    std::sort(list.begin(), list.end(),
              [](const CachedModel& a, const CachedModel& b) { return a.last_used_ms > b.last_used_ms; });
    if (list.size() > api::k_max_cached_models) {
        list.resize(api::k_max_cached_models);
    }
    std::vector<api::CachedModelInfo> out;
    for (const auto& m : list) {
        out.push_back({m.repo, m.revision, m.bytes});
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.model < b.model; });
    return out;
}

std::string enforcement_phrase(MemoryEnforcement e) {
    switch (e) {
    case MemoryEnforcement::mps: return "shares capped by MPS";
    case MemoryEnforcement::watchdog: return "shares enforced by the watchdog";
    case MemoryEnforcement::none: break;
    }
    return "shares NOT enforced";
}

std::string index_list(const std::vector<GpuInfo>& gpus, std::size_t from) {
    std::string out;
    for (std::size_t i = from; i < gpus.size(); ++i) {
        out += (i == from ? "" : ", ") + std::to_string(gpus[i].index);
    }
    return out;
}

} // namespace

std::vector<GpuInfo> inventory_gpus(std::vector<GpuInfo> offered) {
    std::sort(offered.begin(), offered.end(), [](const GpuInfo& a, const GpuInfo& b) { return a.index < b.index; });
    std::size_t n = 0;
    while (n < offered.size() && n < api::k_max_gpus && offered[n].index == static_cast<int>(n)) {
        ++n;
    }
    offered.resize(n);
    return offered;
}

std::optional<std::string> gpus_left_out(std::vector<GpuInfo> offered) {
    const std::size_t kept = inventory_gpus(offered).size();
    if (kept == offered.size()) {
        return std::nullopt;
    }
    std::sort(offered.begin(), offered.end(), [](const GpuInfo& a, const GpuInfo& b) { return a.index < b.index; });
    const std::string which = "GPU(s) " + index_list(offered, kept) + " left out of what the pool sees: ";
    if (kept == api::k_max_gpus) {
        return which + "a worker offers at most " + std::to_string(api::k_max_gpus) + " GPUs";
    }
    return which + "the pool numbers a worker's GPUs 0 to n-1 and GPU " + std::to_string(kept) +
           " is not offered (worker.toml [[gpu]] share = false); share the GPUs from 0 on";
}

api::Inventory offer_inventory(const OfferInputs& in, const ShareSettings& share, const OfferOptions& opt) {
    api::Inventory inv;
    for (const auto& info : inventory_gpus(in.gpus)) {
        inv.gpus.push_back({info.index, info.model, info.memory_mib, info.uuid, to_string(in.enforcement)});
    }
    const auto cores = static_cast<std::int64_t>(std::max(1u, std::thread::hardware_concurrency()));
    inv.cpu_milli = share.cpu_milli.value_or(opt.cpu_milli > 0 ? opt.cpu_milli : cores * 1000);
    inv.memory_mib = share.memory_mib.value_or(opt.memory_mib > 0 ? opt.memory_mib : total_memory_mib());
    inv.slots = std::max(0, share.max_jobs.value_or(opt.slots));
    inv.runtime = in.runtime;
    if (in.models != nullptr) {
        inv.cached_models = cached_models(*in.models);
        constexpr std::int64_t k_gib = std::int64_t{1} << 30;
        std::int64_t free = in.models->free_bytes();
        if (in.models->cap_bytes() > 0) {
            free = std::min(free, std::max<std::int64_t>(0, in.models->cap_bytes() - in.models->used_bytes()));
        }
        inv.cache_free_mib = free >= 0 ? free / k_gib * 1024 : -1;
    }
    return inv;
}

std::string offer_line(const OfferInputs& in, const api::Inventory& inv, const std::string& url, std::int64_t worker_id) {
    std::string line = "sharing with " + url + " as worker " + std::to_string(worker_id) + ": " +
                       resources::format_milli(inv.cpu_milli) + " CPUs, " +
                       resources::format_memory_mib(inv.memory_mib) + " memory, ";
    if (in.gpus.empty()) {
        line += "no NVIDIA driver found: CPU-only jobs";
    }
    const auto gpus = inventory_gpus(in.gpus);
    for (std::size_t i = 0; i < gpus.size(); ++i) {
        line += (i == 0 ? "" : "; ") + std::string("GPU ") + std::to_string(gpus[i].index) + " " + gpus[i].name +
                " (" + resources::format_memory_mib(gpus[i].memory_mib) + ", " + enforcement_phrase(in.enforcement) +
                ")";
    }
    if (auto why = gpus_left_out(in.gpus)) {
        line += (gpus.empty() ? "" : "; ") + *why;
    }
    return line + "; jobs run with " + in.runtime;
}

std::vector<std::int64_t> inventory_indexes(const std::vector<std::int64_t>& indexes, const api::Inventory& inv) {
    std::vector<std::int64_t> out;
    for (std::int64_t i : indexes) {
        if (std::any_of(inv.gpus.begin(), inv.gpus.end(), [&](const api::GpuInventory& g) { return g.index == i; })) {
            out.push_back(i);
        }
    }
    return out;
}

std::string announce_offer(const OfferInputs& in, const api::Inventory& inv, const std::string& url,
                           std::int64_t worker_id) {
    if (auto why = gpus_left_out(in.gpus)) {
        spdlog::warn("{}", *why);
    }
    return offer_line(in, inv, url, worker_id);
}

} // namespace gpupool::worker

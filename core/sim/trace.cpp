#include "core/sim/trace.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <map>

namespace gpupool::sim {

namespace {

std::vector<std::string> split(const std::string& line, char sep) {
    std::vector<std::string> parts;
    std::string cur;
    for (char c : line) {
        if (c == sep) {
            parts.push_back(cur);
            cur.clear();
        } else if (c != '\r') {
            cur.push_back(c);
        }
    }
    parts.push_back(cur);
    return parts;
}

Error bad(const std::filesystem::path& file, std::uint32_t line, std::string message) {
    Error e = make_error(ErrorCode::invalid_input, std::move(message));
    e.where = SourcePos{file.string(), line, 0};
    return e;
}

// A CSV file read whole: header -> column index, rows as fields.
struct Table {
    std::map<std::string, std::size_t> columns;
    std::vector<std::vector<std::string>> rows;
    std::vector<std::uint32_t> lines;
};

Result<Table> read_table(const std::filesystem::path& file, const std::vector<std::string>& required) {
    std::ifstream in(file);
    if (!in) {
        return make_error(ErrorCode::not_found,
                          "cannot read trace file " + file.string() + " (does it exist? see ../shared/data/README.md)");
    }
    Table t;
    std::string line;
    if (!std::getline(in, line)) {
        return bad(file, 1, "empty file: expected a header line");
    }
    auto header = split(line, ',');
    for (std::size_t i = 0; i < header.size(); ++i) {
        t.columns[header[i]] = i;
    }
    for (const auto& r : required) {
        if (!t.columns.contains(r)) {
            return bad(file, 1, "missing column `" + r + "`");
        }
    }
    std::uint32_t n = 1;
    while (std::getline(in, line)) {
        ++n;
        if (line.empty() || line == "\r") {
            continue;
        }
        auto fields = split(line, ',');
        if (fields.size() < header.size()) {
            return bad(file, n,
                       "expected " + std::to_string(header.size()) + " fields, found " + std::to_string(fields.size()));
        }
        t.rows.push_back(std::move(fields));
        t.lines.push_back(n);
    }
    return t;
}

Result<std::int64_t> integer(const std::filesystem::path& file, std::uint32_t line, const std::string& column,
                             const std::string& text, bool empty_is_zero = false) {
    if (text.empty() && empty_is_zero) {
        return 0;
    }
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || p != text.data() + text.size()) {
        return bad(file, line, "column `" + column + "`: expected an integer, got `" + text + "`");
    }
    return v;
}

Result<double> number(const std::filesystem::path& file, std::uint32_t line, const std::string& column,
                      const std::string& text) {
    try {
        std::size_t used = 0;
        double v = std::stod(text, &used);
        if (used == text.size()) {
            return v;
        }
    } catch (const std::exception&) {
    }
    return bad(file, line, "column `" + column + "`: expected a number, got `" + text + "`");
}

} // namespace

Result<std::vector<TraceNode>> load_nodes(const std::filesystem::path& file) {
    auto t = read_table(file, {"sn", "cpu_milli", "memory_mib", "gpu", "model"});
    if (!t) {
        return t.error();
    }
    std::vector<TraceNode> nodes;
    for (std::size_t r = 0; r < t->rows.size(); ++r) {
        const auto& f = t->rows[r];
        const auto line = t->lines[r];
        auto col = [&](const char* c) -> const std::string& { return f[t->columns.at(c)]; };
        TraceNode n;
        n.name = col("sn");
        auto cpu = integer(file, line, "cpu_milli", col("cpu_milli"));
        auto mem = integer(file, line, "memory_mib", col("memory_mib"));
        auto gpu = integer(file, line, "gpu", col("gpu"));
        if (!cpu || !mem || !gpu) {
            return !cpu ? cpu.error() : !mem ? mem.error() : gpu.error();
        }
        n.cpu_milli = *cpu;
        n.memory_mib = *mem;
        n.gpus = *gpu;
        n.model = col("model");
        if (n.gpus < 0 || n.gpus > 64 || n.cpu_milli < 0 || n.memory_mib < 0) {
            return bad(file, line, "node `" + n.name + "` has out-of-range resources");
        }
        nodes.push_back(std::move(n));
    }
    return nodes;
}

Result<std::vector<TracePod>> load_pods(const std::filesystem::path& file) {
    auto t = read_table(file, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"});
    if (!t) {
        return t.error();
    }
    const bool has_spec = t->columns.contains("gpu_spec");
    const bool has_qos = t->columns.contains("qos");
    const bool has_times = t->columns.contains("creation_time") && t->columns.contains("deletion_time");
    const bool has_sched = t->columns.contains("scheduled_time");
    std::vector<TracePod> pods;
    pods.reserve(t->rows.size());
    for (std::size_t r = 0; r < t->rows.size(); ++r) {
        const auto& f = t->rows[r];
        const auto line = t->lines[r];
        auto col = [&](const char* c) -> const std::string& { return f[t->columns.at(c)]; };
        TracePod p;
        p.name = col("name");
        std::int64_t* targets[] = {&p.cpu_milli, &p.memory_mib, &p.num_gpu, &p.gpu_milli};
        const char* names[] = {"cpu_milli", "memory_mib", "num_gpu", "gpu_milli"};
        for (std::size_t i = 0; i < 4; ++i) {
            auto v = integer(file, line, names[i], col(names[i]));
            if (!v) {
                return v.error();
            }
            *targets[i] = *v;
        }
        if (p.num_gpu < 0 || p.gpu_milli < 0 || p.gpu_milli > 1000 || (p.num_gpu > 1 && p.gpu_milli != 1000) ||
            (p.num_gpu > 0 && p.gpu_milli == 0)) {
            return bad(file, line, "pod `" + p.name + "`: num_gpu/gpu_milli out of range");
        }
        if (has_spec && !col("gpu_spec").empty()) {
            p.gpu_spec = split(col("gpu_spec"), '|');
        }
        if (has_qos) {
            p.qos = col("qos");
        }
        if (has_times) {
            auto c = integer(file, line, "creation_time", col("creation_time"), true);
            auto d = integer(file, line, "deletion_time", col("deletion_time"), true);
            if (!c || !d) {
                return !c ? c.error() : d.error();
            }
            p.creation_time = *c;
            p.deletion_time = *d;
        }
        if (has_sched) {
            auto s = integer(file, line, "scheduled_time", col("scheduled_time"), true);
            if (!s) {
                return s.error();
            }
            p.scheduled_time = *s;
        }
        pods.push_back(std::move(p));
    }
    return pods;
}

Result<std::vector<PublishedResult>> load_published(const std::filesystem::path& file) {
    std::vector<std::string> required{
        "workload", "sc_policy", "total_gpus", "sd_at_130", "unallocated_gpus_at_130", "frag_pct_of_cluster_at_100"};
    for (int k = 50; k <= 130; k += 10) {
        required.push_back("alloc_pct_at_arrived_" + std::to_string(k));
    }
    auto t = read_table(file, required);
    if (!t) {
        return t.error();
    }
    std::vector<PublishedResult> out;
    for (std::size_t r = 0; r < t->rows.size(); ++r) {
        const auto& f = t->rows[r];
        const auto line = t->lines[r];
        auto col = [&](const std::string& c) -> const std::string& { return f[t->columns.at(c)]; };
        PublishedResult p;
        p.workload = col("workload");
        p.policy = col("sc_policy");
        auto total = integer(file, line, "total_gpus", col("total_gpus"));
        if (!total) {
            return total.error();
        }
        p.total_gpus = *total;
        for (int k = 50; k <= 130; k += 10) {
            const std::string c = "alloc_pct_at_arrived_" + std::to_string(k);
            auto v = number(file, line, c, col(c));
            if (!v) {
                return v.error();
            }
            p.alloc_pct.push_back(*v);
        }
        auto sd = number(file, line, "sd_at_130", col("sd_at_130"));
        auto un = number(file, line, "unallocated_gpus_at_130", col("unallocated_gpus_at_130"));
        auto fr = number(file, line, "frag_pct_of_cluster_at_100", col("frag_pct_of_cluster_at_100"));
        if (!sd || !un || !fr) {
            return !sd ? sd.error() : !un ? un.error() : fr.error();
        }
        p.sd_at_130 = *sd;
        p.unallocated_gpus_at_130 = *un;
        p.frag_pct_at_100 = *fr;
        out.push_back(std::move(p));
    }
    return out;
}

std::string policy_key(const std::string& published_policy) {
    std::string name = published_policy;
    if (auto dash = name.find('-'); dash != std::string::npos) {
        name = name.substr(dash + 1);
    }
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (name == "gpupacking") {
        return "packing";
    }
    return name;
}

} // namespace gpupool::sim

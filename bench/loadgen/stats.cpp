#include "bench/loadgen/stats.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <sys/resource.h>
#include <unistd.h>

namespace gpupool::loadgen {

namespace {

std::uint32_t to_us(Clock::duration d) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
    return static_cast<std::uint32_t>(std::clamp<std::int64_t>(us, 0, UINT32_MAX));
}

// The q-quantile of sorted samples, in milliseconds (nearest rank).
double quantile_ms(const std::vector<std::uint32_t>& sorted, double q) {
    if (sorted.empty()) {
        return 0;
    }
    auto rank = static_cast<std::size_t>(q * static_cast<double>(sorted.size()));
    return sorted[std::min(rank, sorted.size() - 1)] / 1000.0;
}

std::string ms(double v) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(v < 10 ? 2 : 1) << v;
    return s.str();
}

std::vector<std::uint32_t> sorted(std::vector<std::uint32_t> v) {
    std::sort(v.begin(), v.end());
    return v;
}

std::string status_list(const std::map<long, std::int64_t>& statuses) {
    std::string out;
    for (const auto& [status, n] : statuses) {
        out += (out.empty() ? "" : " ") + (status == 0 ? std::string("none") : std::to_string(status)) + "x" +
               std::to_string(n);
    }
    return out;
}

} // namespace

std::string failure_kind(CURLcode code) {
    switch (code) {
    case CURLE_COULDNT_CONNECT:
        return "connection refused";
    case CURLE_OPERATION_TIMEDOUT:
        return "timeout";
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
        return "connection closed or reset";
    default:
        return curl_easy_strerror(code);
    }
}

void Stats::request(const std::string& route, const HttpResult& r, bool ok) {
    Row& row = m_routes[route];
    ++m_requests;
    row.statuses[r.status]++;
    if (r.status != 0) {
        row.total_us.push_back(to_us(r.elapsed));
        row.server_us.push_back(to_us(r.server));
    }
    if (!ok) {
        ++row.failed;
        ++m_failures;
        const std::string kind = r.status == 0 ? failure_kind(r.curl) : "HTTP " + std::to_string(r.status);
        m_failure_kinds[route + ": " + kind]++;
    }
}

void Stats::sample(const std::string& row, Clock::duration d) {
    m_samples[row].push_back(to_us(d));
}

void Stats::count(const std::string& counter, std::int64_t n) {
    m_counters[counter] += n;
}

std::int64_t Stats::counter(const std::string& name) const {
    auto it = m_counters.find(name);
    return it == m_counters.end() ? 0 : it->second;
}

void Stats::print(std::ostream& out, double seconds) const {
    const double secs = std::max(seconds, 1e-9);
    out << "| route | requests | per s | p50 ms | p99 ms | max ms | server p99 ms | statuses | failed |\n"
        << "|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& [route, row] : m_routes) {
        const auto total = sorted(row.total_us);
        const auto server = sorted(row.server_us);
        const auto n = static_cast<double>(total.size());
        out << "| " << route << " | " << total.size() << " | " << ms(n / secs) << " | " << ms(quantile_ms(total, 0.5))
            << " | " << ms(quantile_ms(total, 0.99)) << " | " << ms(total.empty() ? 0 : total.back() / 1000.0) << " | "
            << ms(quantile_ms(server, 0.99)) << " | " << status_list(row.statuses) << " | " << row.failed << " |\n";
    }
    if (!m_samples.empty()) {
        out << "\n| derived | samples | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|\n";
        for (const auto& [name, samples] : m_samples) {
            const auto s = sorted(samples);
            out << "| " << name << " | " << s.size() << " | " << ms(quantile_ms(s, 0.5)) << " | "
                << ms(quantile_ms(s, 0.99)) << " | " << ms(s.empty() ? 0 : s.back() / 1000.0) << " |\n";
        }
    }
    out << '\n';
    for (const auto& [name, n] : m_counters) {
        out << name << ": " << n << " (" << ms(static_cast<double>(n) / secs) << "/s)\n";
    }
    if (m_failure_kinds.empty()) {
        out << "failures: none\n";
    }
    for (const auto& [kind, n] : m_failure_kinds) {
        out << "failed: " << kind << ": " << n << '\n';
    }
}

namespace {

// utime + stime of a /proc/.../stat file, in seconds (0 when unreadable). The command may hold
// spaces, so the fields (utime and stime are the 14th and 15th) are counted from the last ')'.
double stat_cpu_s(const std::string& path) {
    std::ifstream stat(path);
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');
    if (close == std::string::npos || close + 2 > text.size()) {
        return 0;
    }
    std::istringstream rest(text.substr(close + 2));
    std::string field;
    long long utime = 0;
    long long stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
        if (i == 14) {
            utime = std::stoll(field);
        } else if (i == 15) {
            stime = std::stoll(field);
        }
    }
    return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

} // namespace

std::map<int, double> read_thread_cpu(int pid) {
    std::map<int, double> out;
    std::error_code ec;
    const std::string dir = "/proc/" + std::to_string(pid) + "/task";
    for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::end(it);
         it.increment(ec)) {
        const std::string tid = it->path().filename().string();
        out[std::stoi(tid)] = stat_cpu_s(dir + "/" + tid + "/stat");
    }
    return out;
}

std::optional<ProcSample> read_proc(int pid) {
    const std::string dir = "/proc/" + std::to_string(pid);
    std::ifstream status(dir + "/status");
    if (!status) {
        return std::nullopt;
    }
    ProcSample p;
    std::string line;
    while (std::getline(status, line)) {
        std::istringstream in(line);
        std::string key;
        in >> key;
        if (key == "VmRSS:") {
            in >> p.rss_kib;
        } else if (key == "VmHWM:") {
            in >> p.hwm_kib;
        } else if (key == "Threads:") {
            in >> p.threads;
        }
    }
    p.cpu_s = stat_cpu_s(dir + "/stat");
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(dir + "/fd", ec); !ec && it != std::filesystem::end(it);
         it.increment(ec)) {
        ++p.fds;
    }
    return p;
}

double own_cpu_s() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
    return secs(ru.ru_utime) + secs(ru.ru_stime);
}

} // namespace gpupool::loadgen

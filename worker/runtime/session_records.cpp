#include "worker/runtime/session_records.hpp"

#include "core/util/files.hpp"

#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace gpupool::worker {

namespace fs = std::filesystem;

namespace {

std::string start_line(const SessionRecords::Record& r) {
    return "+ " + r.name + " " + std::to_string(r.session) + " " + std::to_string(r.start_time) + "\n";
}

// A job's name as the runtimes accept it never holds whitespace; one that does cannot be recorded
// in this format and is skipped.
bool recordable(const std::string& name) {
    return !name.empty() && name.find_first_of(" \t\r\n") == std::string::npos;
}

} // namespace

SessionRecords::SessionRecords(fs::path dir, std::int64_t compact_bytes)
    : m_dir(std::move(dir)), m_compact_bytes(compact_bytes) {}

SessionRecords::~SessionRecords() {
    if (m_fd >= 0) {
        ::close(m_fd);
    }
}

std::vector<SessionRecords::Record> SessionRecords::leftovers() const {
    if (m_dir.empty()) {
        return {};
    }
    std::map<std::string, Record> live;
    std::ifstream in(file());
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::string op;
        Record r;
        if (!(words >> op >> r.name)) {
            continue;
        }
        if (op == "+" && (words >> r.session >> r.start_time)) {
            live[r.name] = r;
        } else if (op == "-") {
            live.erase(r.name);
        }
    }
    std::error_code ec;
    for (auto it = fs::directory_iterator(m_dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
        if (it->path().extension() == ".pid") {
            Record r;
            r.name = it->path().stem().string();
            std::ifstream(it->path()) >> r.session >> r.start_time;
            live.try_emplace(r.name, r);
        }
    }
    std::vector<Record> out;
    for (auto& [name, r] : live) {
        out.push_back(std::move(r));
    }
    return out;
}

void SessionRecords::reopen() {
    if (m_fd >= 0) {
        ::close(m_fd);
    }
    m_fd = ::open(file().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (m_fd < 0) {
        spdlog::warn("process runtime: cannot open {}: {}", file().string(), std::strerror(errno));
    }
}

void SessionRecords::clear() {
    if (m_dir.empty()) {
        return;
    }
    std::error_code ec;
    std::vector<fs::path> old;
    for (auto it = fs::directory_iterator(m_dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
        if (it->path().extension() == ".pid") {
            old.push_back(it->path());
        }
    }
    for (const auto& p : old) {
        fs::remove(p, ec);
    }
    m_live.clear();
    reopen();
    if (m_fd >= 0 && ::ftruncate(m_fd, 0) != 0) {
        spdlog::warn("process runtime: cannot empty {}: {}", file().string(), std::strerror(errno));
    }
    m_bytes = 0;
}

void SessionRecords::append(const std::string& line) {
    if (m_fd < 0) {
        return;
    }
    if (!util::write_all(m_fd, line)) {
        spdlog::warn("process runtime: cannot write {}: {}", file().string(), std::strerror(errno));
        return;
    }
    m_bytes += static_cast<std::int64_t>(line.size());
}

void SessionRecords::started(const Record& r) {
    if (m_dir.empty() || !recordable(r.name)) {
        return;
    }
    if (m_fd < 0) {
        reopen();
    }
    m_live[r.name] = r;
    append(start_line(r));
}

void SessionRecords::ended(const std::string& name) {
    if (m_dir.empty() || m_live.erase(name) == 0) {
        return;
    }
    if (m_live.empty()) {
        // Nothing live: the whole file says nothing any more.
        if (m_fd >= 0 && ::ftruncate(m_fd, 0) == 0) {
            m_bytes = 0;
            return;
        }
    }
    append("- " + name + "\n");
    if (m_bytes > m_compact_bytes) {
        compact();
    }
}

void SessionRecords::compact() {
    std::string text;
    for (const auto& [name, r] : m_live) {
        text += start_line(r);
    }
    if (auto st = util::write_private_file(file(), text); !st) {
        spdlog::warn("process runtime: cannot rewrite {}: {}", file().string(), st.error().message);
        return;
    }
    reopen();
    m_bytes = static_cast<std::int64_t>(text.size());
}

} // namespace gpupool::worker

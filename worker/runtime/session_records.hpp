// SessionRecords: the process runtime's record of the sessions it started, so that the next worker
// on the same state directory can kill what a worker killed with SIGKILL left running. One
// append-only file, `sessions`, rather than a file per job: creating and removing a file per job
// was a measurable part of a short job's cost on some file systems (#12, attempt_folders.hpp).
//
// Format: one line per event, `+ <name> <session> <start time>` when a job starts and `- <name>`
// when it is gone; each line is one write(2) to a descriptor opened O_APPEND, so a worker killed
// meanwhile leaves whole lines (a torn or unreadable line is ignored when read back).
//
// Rules:
// - leftovers() reads what a previous run left: every `+` without a later `-` (the latest `+` of a
//   name wins), and the `<name>.pid` files older workers wrote (`<session> <start time>`).
//   clear() then empties the file and removes those .pid files; call it once the leftovers are dealt
//   with, before the first started().
// - started() and ended() append one line. When no session is left the file is truncated to
//   nothing; when it grows past `compact_bytes` with sessions still live, it is rewritten with only
//   those (a temporary file renamed over it), so it stays small while jobs run back to back.
// - A default-constructed (or empty-directory) SessionRecords records nothing.
// Failures are logged, not returned: a record that could not be written costs the kill of a job's
// leftovers after a crash, nothing else. Not thread-safe (the runtime's thread owns it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace gpupool::worker {

class SessionRecords {
public:
    struct Record {
        std::string name;
        long long session = 0;
        unsigned long long start_time = 0;
    };

    SessionRecords() = default;
    explicit SessionRecords(std::filesystem::path dir, std::int64_t compact_bytes = 1 << 20);
    ~SessionRecords();
    SessionRecords(const SessionRecords&) = delete;
    SessionRecords& operator=(const SessionRecords&) = delete;

    std::vector<Record> leftovers() const;
    void clear();
    void started(const Record& r);
    void ended(const std::string& name);

    std::filesystem::path file() const { return m_dir / "sessions"; }

private:
    void append(const std::string& line);
    void reopen();
    void compact();

    std::filesystem::path m_dir;
    std::int64_t m_compact_bytes = 1 << 20;
    int m_fd = -1;
    std::int64_t m_bytes = 0;
    std::map<std::string, Record> m_live;
};

} // namespace gpupool::worker

// PathFirst: puts a directory first on PATH for the life of the guard (processes started meanwhile
// inherit it), so that a test's stand-in for a program (nvidia-smi) is the one found. Not thread-safe:
// PATH is the process's.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace gpupool::test {

class PathFirst {
public:
    explicit PathFirst(const std::filesystem::path& dir) {
        const char* p = std::getenv("PATH");
        m_old = p != nullptr ? p : "";
        ::setenv("PATH", (dir.string() + ":" + m_old).c_str(), 1);
    }
    ~PathFirst() { ::setenv("PATH", m_old.c_str(), 1); }
    PathFirst(const PathFirst&) = delete;
    PathFirst& operator=(const PathFirst&) = delete;

private:
    std::string m_old;
};

} // namespace gpupool::test

// A real git repository made on the fly, for the recipe repository tests: files are written into
// its work tree and committed with a fixed identity, so the tests need git and nothing else.
#pragma once

#include "tests/support.hpp"

#include <boost/process.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace gpupool::test {

class GitRepo {
public:
    explicit GitRepo(std::filesystem::path dir) : m_dir(std::move(dir)) {
        std::filesystem::create_directories(m_dir);
        git({"init", "--quiet", "--initial-branch=main"});
    }
    const std::filesystem::path& dir() const { return m_dir; }

    void write(const std::string& rel, const std::string& text) const {
        std::filesystem::create_directories((m_dir / rel).parent_path());
        write_file(m_dir / rel, text);
    }
    // A recipe folder: recipe.toml and a README whose first paragraph is `description`.
    void recipe(const std::string& name, const std::string& toml, const std::string& description = "") const {
        write(name + "/recipe.toml", toml);
        if (!description.empty()) {
            write(name + "/README.md", "# " + name + "\n\n" + description + "\n\nMore text.\n");
        }
    }
    // Commits everything; returns the new commit id.
    std::string commit(const std::string& message) const {
        git({"add", "-A"});
        git({"-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "--quiet", "-m", message});
        return head();
    }
    void tag(const std::string& name) const { git({"tag", name}); }
    std::string head() const { return git({"rev-parse", "HEAD"}); }

    // git's stdout, trimmed; REQUIREs success.
    std::string git(std::vector<std::string> args) const {
        namespace bp = boost::process;
        args.insert(args.begin(), {"-C", m_dir.string()});
        bp::ipstream out;
        int rc = bp::system(bp::search_path("git"), bp::args = args, bp::std_out > out, bp::std_err > bp::null,
                            bp::std_in < bp::null);
        std::string text((std::istreambuf_iterator<char>(out)), {});
        REQUIRE(rc == 0);
        while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
            text.pop_back();
        }
        return text;
    }

private:
    std::filesystem::path m_dir;
};

// A minimal valid recipe, with optional extra lines.
inline std::string tiny_recipe(const std::string& extra = "") {
    return "format = 1\nimage = \"localhost/gpupool/busybox:latest\"\ncommand = \"true\"\n" + extra +
           "[resources]\ngpus = 0\ncpus = 0.1\nmemory = \"64MiB\"\nmax_runtime = \"1m\"\n";
}

} // namespace gpupool::test

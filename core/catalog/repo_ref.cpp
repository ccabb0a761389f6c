#include "core/catalog/repo_ref.hpp"

#include "core/util/sha256.hpp"

#include <algorithm>
#include <cctype>

namespace gpupool::catalog {

namespace {

constexpr std::size_t k_max_location = 2048;
constexpr std::size_t k_max_revision = 128;
constexpr std::size_t k_max_subdir = 256;

// `a/b-c/d_e.f`: relative, names that do not start with `.` (so no `..` and no hidden folder).
bool is_subdir(std::string_view sub) {
    if (sub.empty() || sub.size() > k_max_subdir) {
        return false;
    }
    std::size_t start = 0;
    while (start <= sub.size()) {
        const auto slash = sub.find('/', start);
        const std::string_view name = sub.substr(start, slash == std::string_view::npos ? sub.npos : slash - start);
        if (name.empty() || name.front() == '.' || !std::all_of(name.begin(), name.end(), [](char c) {
                return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-';
            })) {
            return false;
        }
        if (slash == std::string_view::npos) {
            break;
        }
        start = slash + 1;
    }
    return true;
}

bool is_revision(std::string_view rev) {
    if (rev.empty() || rev.size() > k_max_revision || rev.front() == '-' || rev.front() == '.') {
        return false;
    }
    return std::all_of(rev.begin(), rev.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-';
    });
}

Error ref_error(const std::string& field, std::string message) {
    return make_error(ErrorCode::invalid_input, std::move(message), field);
}

} // namespace

std::string RepoRef::text() const {
    return (revision.empty() ? location : location + "@" + revision) + (subdir.empty() ? "" : "#" + subdir);
}

std::string RepoRef::origin_repo() const {
    return subdir.empty() ? location : location + "#" + subdir;
}

Result<RepoRef> parse_repo_ref(std::string_view text, const std::string& field) {
    if (text.empty()) {
        return ref_error(field, "a recipe repository is a URL or a path; this one is empty");
    }
    if (text.size() > k_max_location + 1 + k_max_revision) {
        return ref_error(field, "a recipe repository is at most 2048 characters");
    }
    const bool clean = std::none_of(
        text.begin(), text.end(), [](char c) { return std::iscntrl(static_cast<unsigned char>(c)) != 0 || c == ' '; });
    if (!clean) {
        return ref_error(field, "a recipe repository has no spaces or control characters");
    }
    if (text.front() == '-') {
        return ref_error(field, "a recipe repository does not start with `-`");
    }
    std::string subdir;
    if (auto hash = text.rfind('#'); hash != std::string_view::npos) {
        std::string_view sub = text.substr(hash + 1);
        while (sub.size() > 1 && sub.back() == '/') {
            sub.remove_suffix(1);
        }
        if (!is_subdir(sub)) {
            return ref_error(field, "`#" + std::string(text.substr(hash + 1)) +
                                        "` is not a folder of the repository: a relative path of names (letters, "
                                        "digits, `.`, `_`, `-`, none starting with `.`), like `#recipes`");
        }
        subdir = std::string(sub);
        text = text.substr(0, hash);
        if (text.empty()) {
            return ref_error(field, "`#" + subdir + "` names a folder but no repository before it");
        }
    }
    RepoRef ref{std::string(text), "", subdir};
    if (auto at = text.rfind('@'); at != std::string_view::npos) {
        std::string_view left = text.substr(0, at);
        std::string_view right = text.substr(at + 1);
        if (left.find('/') != std::string_view::npos && is_revision(right)) {
            ref.location = std::string(left);
            ref.revision = std::string(right);
        } else if (right.empty() ||
                   (left.find('/') != std::string_view::npos && right.find('/') == std::string_view::npos)) {
            return ref_error(field, "`@" + std::string(right) +
                                        "` is not a revision: a tag, a branch without `/` or a commit id (letters, "
                                        "digits, `.`, `_`, `-`)");
        }
    }
    if (ref.location.size() > k_max_location) {
        return ref_error(field, "a recipe repository is at most 2048 characters");
    }
    if (ref.location.find("::") != std::string::npos) {
        // git's `transport::address` form runs helpers (`ext::` runs a command); never needed here.
        return ref_error(field, "`transport::address` repositories are not accepted; use a URL or a path");
    }
    return ref;
}

std::string clone_dir_name(const RepoRef& ref) {
    std::string loc = ref.location;
    while (!loc.empty() && (loc.back() == '/' || loc.back() == '.')) {
        loc.pop_back();
    }
    if (loc.ends_with(".git")) {
        loc.resize(loc.size() - 4);
    }
    auto slash = loc.find_last_of("/:");
    std::string tail = slash == std::string::npos ? loc : loc.substr(slash + 1);
    std::string name;
    for (char c : tail) {
        const bool keep = std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_';
        name += keep ? c : '_';
        if (name.size() == 40) {
            break;
        }
    }
    if (name.empty()) {
        name = "repo";
    }
    RepoRef checkout = ref;
    checkout.subdir.clear();
    return name + "-" + util::sha256_hex(checkout.text()).substr(0, 16);
}

} // namespace gpupool::catalog

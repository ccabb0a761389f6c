#include "core/recipe/field_rules.hpp"

#include "core/util/strings.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>

namespace gpupool::recipe {

namespace {

Error rule_error(std::string message) {
    return make_error(ErrorCode::invalid_input, std::move(message));
}

bool model_part_ok(std::string_view part) {
    if (part.empty() || part.size() > 96 || std::isalnum(static_cast<unsigned char>(part.front())) == 0) {
        return false;
    }
    return std::all_of(part.begin(), part.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-';
    });
}

} // namespace

Status check_recipe_name(std::string_view name) {
    constexpr std::size_t k_max = 64;
    const auto ok_char = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    };
    const bool ok = !name.empty() && name.size() <= k_max &&
                    std::isalnum(static_cast<unsigned char>(name.front())) != 0 &&
                    std::all_of(name.begin(), name.end(), ok_char);
    if (!ok) {
        return rule_error("a recipe name is 1 to 64 lowercase letters, digits, `.`, `_` and `-`, starting with a "
                          "letter or digit");
    }
    return {};
}

Status check_origin(const Origin& origin) {
    constexpr std::size_t k_max_repo = 2048;
    if (auto st = check_recipe_name(origin.recipe); !st) {
        return st;
    }
    if (origin.repo.empty() || origin.repo.size() > k_max_repo || has_control_character(origin.repo)) {
        return rule_error("a repository is 1 to 2048 characters with no control characters");
    }
    const auto& rev = origin.revision;
    const bool hex =
        (rev.size() == 40 || rev.size() == 64) && rev.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (!rev.empty() && !hex) {
        return rule_error("a revision is a commit: 40 or 64 lowercase hex digits");
    }
    return {};
}

bool has_nul(std::string_view text) {
    return text.find('\0') != std::string_view::npos;
}

bool has_control_character(std::string_view text) {
    return std::any_of(text.begin(), text.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u < 0x20 || u == 0x7f;
    });
}

Status check_no_nul(std::string_view text) {
    if (has_nul(text)) {
        return rule_error("must not contain a NUL byte");
    }
    return {};
}

Status check_env_name(std::string_view name) {
    if (!util::is_identifier(name)) {
        return rule_error("environment variable names use letters, digits and _ and must not start with a digit");
    }
    if (name.starts_with("GPUPOOL_")) {
        return rule_error("the GPUPOOL_ prefix is reserved for variables the worker sets");
    }
    return {};
}

Status check_model_revision(std::string_view rev) {
    constexpr std::size_t k_max_revision = 128;
    const bool chars_ok = std::all_of(rev.begin(), rev.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
               c == '-' || c == '/';
    });
    bool segments_ok = true;
    for (std::size_t begin = 0; segments_ok && begin <= rev.size();) {
        const std::size_t end = std::min(rev.find('/', begin), rev.size());
        const std::string_view seg = rev.substr(begin, end - begin);
        segments_ok = !seg.empty() && seg != "." && seg != "..";
        begin = end + 1;
    }
    if (rev.empty() || rev.size() > k_max_revision || !chars_ok || !segments_ok ||
        rev.find("..") != std::string_view::npos) {
        return rule_error("`" + util::escape_control(rev) +
                          "` is not a revision: a branch, tag or commit of letters, digits, `.`, `_`, `-` and `/`, "
                          "at most 128 characters, without `..` or empty segments");
    }
    return {};
}

std::string model_repo(std::string_view id) {
    return std::string(id.substr(0, id.find('@')));
}

std::string pinned_model(std::string_view model, std::string_view revision) {
    return model_repo(model) + "@" + std::string(revision);
}

std::string pinned_image(std::string_view image, std::string_view digest) {
    return std::string(image.substr(0, image.find('@'))) + "@" + std::string(digest);
}

Status check_model_id(std::string_view full) {
    const std::size_t at = full.find('@');
    const std::string_view id = full.substr(0, at);
    if (at != std::string_view::npos) {
        if (auto st = check_model_revision(full.substr(at + 1)); !st) {
            return rule_error("`" + util::escape_control(full) + "`: the revision after \"@\": " + st.error().message);
        }
    }
    const std::size_t slash = id.find('/');
    const bool ok = slash == std::string_view::npos
                        ? model_part_ok(id)
                        : model_part_ok(id.substr(0, slash)) && model_part_ok(id.substr(slash + 1));
    if (!ok) {
        return rule_error("`" + util::escape_control(full) +
                          "` is not a model id like \"org/model-name\" (or "
                          "\"org/model-name@revision\")");
    }
    return {};
}

Status check_output_path(std::string_view path) {
    if (path.empty()) {
        return rule_error("must not be empty");
    }
    if (has_nul(path)) {
        return rule_error("must not contain a NUL byte");
    }
    const std::filesystem::path p{std::string(path)};
    const bool parent = std::any_of(p.begin(), p.end(), [](const std::filesystem::path& part) { return part == ".."; });
    if (p.is_absolute() || parent) {
        return rule_error("output paths are relative to the job's output directory and may not contain `..`: `" +
                          util::escape_control(path) + "`");
    }
    return {};
}

} // namespace gpupool::recipe

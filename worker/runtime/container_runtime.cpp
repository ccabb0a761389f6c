#include "worker/runtime/container_runtime.hpp"

#include "core/recipe/field_rules.hpp"
#include "core/recipe/image_ref.hpp"
#include "core/util/strings.hpp"

#include <algorithm>

namespace gpupool::worker {

namespace {

Error spec_error(const ContainerSpec& spec, const std::string& what) {
    return make_error(ErrorCode::invalid_input, "job " + util::escape_control(spec.name) + ": " + what);
}

bool is_container_name(std::string_view name) {
    auto ok = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
               c == '-';
    };
    return !name.empty() && ok(name.front()) && name.front() != '_' && name.front() != '.' && name.front() != '-' &&
           std::all_of(name.begin(), name.end(), ok);
}

bool is_mount_path(std::string_view path) {
    return !path.empty() && path.find_first_of(":,") == std::string_view::npos && !recipe::has_nul(path);
}

} // namespace

Status check_container_spec(const ContainerSpec& spec, bool container) {
    // Also the process runtime's record file name (state_dir/NAME.pid).
    if (!is_container_name(spec.name)) {
        return spec_error(spec, "is not a container name ([A-Za-z0-9][A-Za-z0-9_.-]*)");
    }
    if (spec.argv.empty()) {
        return spec_error(spec, "has an empty command");
    }
    for (std::size_t i = 0; i < spec.argv.size(); ++i) {
        if (recipe::has_nul(spec.argv[i])) {
            return spec_error(spec, "argument " + std::to_string(i) + " of the command contains a NUL byte");
        }
    }
    for (const auto& [key, value] : spec.env) {
        if (!util::is_identifier(key)) {
            return spec_error(spec,
                              "environment variable name `" + util::escape_control(key) + "` is not an identifier");
        }
        if (recipe::has_nul(value)) {
            return spec_error(spec, "environment variable " + key + " contains a NUL byte");
        }
    }
    if (!container) {
        return {};
    }
    if (auto st = recipe::validate_image_reference(spec.image); !st) {
        return spec_error(spec, "image: " + st.error().message);
    }
    for (const auto& [key, value] : spec.labels) {
        if (key.empty() || key.find('=') != std::string::npos || recipe::has_nul(key) || recipe::has_nul(value)) {
            return spec_error(spec, "label `" + util::escape_control(key) +
                                        "` is not a key without `=` and a value without NUL");
        }
    }
    if (spec.user.empty() || recipe::has_nul(spec.user)) {
        return spec_error(spec, "the container user must be set and contain no NUL byte");
    }
    if (!spec.workdir.empty() && (!spec.workdir.is_absolute() || recipe::has_nul(spec.workdir.string()))) {
        return spec_error(spec, "the working directory `" + util::escape_control(spec.workdir.string()) +
                                    "` is not an absolute path without NUL");
    }
    for (const Mount& m : spec.mounts) {
        if (!is_mount_path(m.host.string()) || !is_mount_path(m.container)) {
            return spec_error(spec, "mount `" + util::escape_control(m.host.string()) + "` -> `" +
                                        util::escape_control(m.container) +
                                        "`: a mounted path must not be empty or contain `:`, `,` or NUL");
        }
    }
    return {};
}

} // namespace gpupool::worker

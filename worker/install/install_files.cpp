#include "worker/install/install_files.hpp"

#include "core/util/files.hpp"

#include <fstream>
#include <sstream>

namespace gpupool::worker {

namespace fs = std::filesystem;

fs::path under_root(const fs::path& root, const fs::path& p) {
    return root / p.relative_path();
}

Result<std::optional<std::string>> read_existing(const fs::path& on_disk) {
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(on_disk, ec))) {
        return std::optional<std::string>{};
    }
    if (!fs::is_regular_file(on_disk, ec)) {
        return make_error(ErrorCode::invalid_input, "`" + on_disk.string() + "` exists and is not a regular file");
    }
    std::ifstream in(on_disk, std::ios::binary);
    if (!in) {
        return make_error(ErrorCode::io, "cannot read `" + on_disk.string() + "`");
    }
    std::ostringstream s;
    s << in.rdbuf();
    return std::optional<std::string>(s.str());
}

Result<std::optional<std::string>> plan_owned(const fs::path& root, bool force, PlannedFile& file) {
    auto existing = read_existing(under_root(root, file.path));
    if (!existing) {
        return existing.error();
    }
    if (!*existing) {
        return std::optional<std::string>{};
    }
    if (**existing == file.text) {
        file.what = "unchanged";
        return std::optional<std::string>{};
    }
    if (!force) {
        return std::optional<std::string>(file.path.string() + ": differs from what install would write");
    }
    file.what = "replaced";
    return std::optional<std::string>{};
}

Status write_planned(const fs::path& root, const PlannedFile& f) {
    const fs::path target = under_root(root, f.path);
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    if (ec) {
        return make_error(ErrorCode::io, "cannot create `" + target.parent_path().string() + "`: " + ec.message());
    }
    if (auto st = util::write_private_file(target, f.text); !st) {
        return st;
    }
    fs::permissions(target, f.mode, ec);
    if (ec) {
        return make_error(ErrorCode::io, "cannot set the mode of `" + target.string() + "`: " + ec.message());
    }
    return {};
}

} // namespace gpupool::worker

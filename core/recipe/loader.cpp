#include "core/recipe/loader.hpp"

#include "core/recipe/builtin.hpp"
#include "core/recipe/sections.hpp"
#include "core/recipe/toml_values.hpp"
#include "core/util/strings.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <system_error>

namespace gpupool::recipe::detail {

namespace fs = std::filesystem;

Result<Loaded> parse_toml(std::string_view text, std::string source, fs::path base_dir) {
    try {
        Loaded l{toml::parse(text, source), source, std::move(base_dir)};
        l.texts.emplace(source, std::string(text));
        return l;
    } catch (const toml::parse_error& e) {
        Error err = make_error(ErrorCode::invalid_input, "TOML syntax error: " + std::string(e.description()));
        err.where = to_pos(e.source());
        if (err.where->file.empty()) {
            err.where->file = source;
        }
        return err;
    }
}

Result<std::string> read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::error_code ec;
        const char* why = fs::exists(path, ec) ? "cannot be read" : "does not exist";
        return make_error(ErrorCode::not_found, "recipe file `" + path.string() + "` " + why);
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) {
        return make_error(ErrorCode::io, "error reading `" + path.string() + "`");
    }
    return ss.str();
}

void merge_into(toml::table& parent, toml::table& child, bool is_resources) {
    if (is_resources) {
        bool child_sets_gpu = std::any_of(k_gpu_choice.begin(), k_gpu_choice.end(),
                                          [&](const std::string& k) { return child.contains(k); });
        if (child_sets_gpu) {
            for (const auto& k : k_gpu_choice) {
                parent.erase(k);
            }
        }
    }
    for (auto&& [key, value] : child) {
        auto* existing = parent.get(key.str());
        if (existing != nullptr && existing->is_table() && value.is_table()) {
            merge_into(*existing->as_table(), *value.as_table(), key.str() == "resources");
            continue;
        }
        value.visit([&, &k = key](auto& v) { parent.insert_or_assign(k, std::move(v)); });
    }
}

Result<Loaded> Loader::load(Loaded self, int depth) {
    const toml::node* ext = self.table.get("extends");
    if (ext == nullptr) {
        return self;
    }
    Diagnostics diag;
    auto name = expect_string(*ext, "extends", diag);
    if (!name) {
        return diag.take();
    }
    if (depth >= k_max_extends_depth) {
        diag.add(*ext, "extends", "`extends` chain is deeper than " + std::to_string(k_max_extends_depth));
        return diag.take();
    }
    bool is_path = name->find('/') != std::string::npos || name->ends_with(".toml");
    Result<Loaded> parent = is_path ? parent_from_file(self, *ext, *name) : parent_from_builtin(self, *ext, *name);
    if (!parent) {
        return parent.error();
    }
    auto resolved = load(std::move(*parent), depth + 1);
    if (!resolved) {
        return resolved.error();
    }
    Loaded merged = std::move(*resolved);
    self.table.erase("extends");
    merge_into(merged.table, self.table, false);
    merged.texts.merge(self.texts);
    merged.source = self.source;
    merged.base_dir = self.base_dir;
    return merged;
}

Result<Loaded> Loader::parent_from_file(const Loaded& self, const toml::node& ext, const std::string& name) {
    Diagnostics diag;
    if (!options.allow_file_access) {
        diag.add(ext, "extends", "`extends` of a file path is not allowed here; name a built-in recipe");
        return diag.take();
    }
    fs::path p = fs::path(name).is_absolute() ? fs::path(name) : self.base_dir / name;
    std::error_code ec;
    fs::path canon = fs::weakly_canonical(p, ec);
    std::string src = ec ? p.string() : canon.string();
    if (std::find(chain.begin(), chain.end(), src) != chain.end()) {
        diag.add(ext, "extends", "`extends` forms a cycle through `" + src + "`");
        return diag.take();
    }
    auto text = read_file(p);
    if (!text) {
        diag.add(ext, "extends", text.error().message);
        return diag.take();
    }
    chain.push_back(src);
    return parse_toml(*text, p.string(), p.parent_path());
}

Result<Loaded> Loader::parent_from_builtin(const Loaded& self, const toml::node& ext, const std::string& name) {
    Diagnostics diag;
    auto text = builtin_recipe(name);
    if (!text && options.resolve_name && options.allow_file_access) {
        if (auto found = options.resolve_name(name)) {
            return parent_from_repository(ext, name, *found);
        }
    }
    if (!text) {
        const bool repos = options.resolve_name && options.allow_file_access;
        std::string msg = repos ? "unknown recipe `" + name + "`: not built in and in none of the recipe repositories"
                                : "unknown built-in recipe `" + name + "`";
        auto names = builtin_recipe_names();
        if (auto s = util::nearest(name, names)) {
            msg += "; did you mean `" + *s + "`?";
        } else {
            msg += "; built-ins are " + util::join(names, ", ");
        }
        if (repos) {
            msg += " (`gpupool recipe list` shows the repositories' recipes)";
        }
        diag.add(ext, "extends", std::move(msg));
        return diag.take();
    }
    std::string src = "builtin:" + name;
    if (std::find(chain.begin(), chain.end(), src) != chain.end()) {
        diag.add(ext, "extends", "`extends` forms a cycle through `" + src + "`");
        return diag.take();
    }
    chain.push_back(src);
    return parse_toml(*text, src, self.base_dir);
}

Result<Loaded> Loader::parent_from_repository(const toml::node& ext, const std::string& name,
                                              const NamedRecipe& found) {
    Diagnostics diag;
    std::error_code ec;
    fs::path canon = fs::weakly_canonical(found.file, ec);
    std::string src = ec ? found.file.string() : canon.string();
    if (std::find(chain.begin(), chain.end(), src) != chain.end()) {
        diag.add(ext, "extends", "`extends` forms a cycle through recipe `" + name + "` (" + src + ")");
        return diag.take();
    }
    auto text = read_file(found.file);
    if (!text) {
        diag.add(ext, "extends", text.error().message);
        return diag.take();
    }
    chain.push_back(src);
    origins.push_back(found.origin);
    return parse_toml(*text, found.file.string(), found.file.parent_path());
}

} // namespace gpupool::recipe::detail

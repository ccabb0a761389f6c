#include "core/recipe/parser.hpp"

#include "core/recipe/builtin.hpp"
#include "core/recipe/field_rules.hpp"
#include "core/recipe/image_ref.hpp"
#include "core/resources/quantity.hpp"
#include "core/util/strings.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

namespace gpupool::recipe {

const char* to_string(Priority p) {
    switch (p) {
    case Priority::low: return "low";
    case Priority::normal: return "normal";
    case Priority::high: return "high";
    }
    return "normal";
}

std::vector<std::string> JobSpec::argv() const {
    if (shell) {
        return {"/bin/sh", "-c", command.empty() ? std::string() : command.front()};
    }
    return command;
}

std::uint64_t Sweep::job_count() const {
    std::uint64_t n = 1;
    for (const auto& p : params) {
        n *= p.values.size();
    }
    return n;
}

namespace {

namespace fs = std::filesystem;
namespace res = gpupool::resources;

const std::vector<std::string> k_top_keys{"format", "name", "description", "image", "command", "extends",
                                          "priority", "resources", "env", "inputs", "outputs", "cache",
                                          "sweep", "retry", "logs"};
const std::vector<std::string> k_resource_keys{"gpu",  "gpus",   "gpu_memory", "gpu_models",
                                               "cpus", "memory", "disk",       "max_runtime"};
const std::vector<std::string> k_inputs_keys{"paths", "max_size"};
const std::vector<std::string> k_outputs_keys{"paths", "max_size"};
const std::vector<std::string> k_logs_keys{"max_size"};
const std::vector<std::string> k_cache_keys{"models"};
const std::vector<std::string> k_retry_keys{"max_attempts", "on_exit_codes"};
const std::vector<std::string> k_gpu_choice{"gpu", "gpus", "gpu_memory"};

SourcePos to_pos(const toml::source_region& r) {
    SourcePos pos;
    if (r.path) {
        pos.file = *r.path;
    }
    pos.line = r.begin.line;
    pos.column = r.begin.column;
    return pos;
}

std::string type_phrase(const toml::node& n) {
    switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time: return "a date/time";
    case toml::node_type::none: break;
    }
    return "nothing";
}

std::string render_float(double v) {
    std::array<char, 64> buf{};
    auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
    if (ec != std::errc()) {
        return "0";
    }
    std::string s(buf.data(), end);
    return s;
}

// Collects every problem found in one pass and orders them root causes first.
//
// Rules:
// - A consequence (a required key that is missing, a placeholder no sweep defines, a setting that
//   needs another one) is listed after every other problem: a misspelt key or a value of the wrong
//   type is usually why it happened, and the reader should see that first.
// - Within each group: files in the order their first problem was found, then by position.
// - Positions inside a `--set KEY` override (registered with add_override_source) have no line or
//   column: the source is the command line, and "line 1" would send the reader to the recipe.
class Diagnostics {
public:
    void add(const toml::source_region& where, std::string field, std::string message) {
        push(where, std::move(field), std::move(message), false);
    }
    void add(const toml::node& node, std::string field, std::string message) {
        add(node.source(), std::move(field), std::move(message));
    }
    void add_consequence(const toml::node& node, std::string field, std::string message) {
        push(node.source(), std::move(field), std::move(message), true);
    }
    void add_plain(std::string file, std::string field, std::string message, bool consequence = false) {
        Error e = make_error(ErrorCode::invalid_input, std::move(message), std::move(field));
        e.where = SourcePos{std::move(file), 0, 0};
        m_errors.push_back({std::move(e), consequence});
    }
    void add_override_source(std::string source) { m_override_sources.push_back(std::move(source)); }
    bool empty() const { return m_errors.empty(); }
    std::size_t count() const { return m_errors.size(); }

    Error take() {
        std::vector<std::string> files;
        auto rank = [&files](const std::string& f) {
            auto it = std::find(files.begin(), files.end(), f);
            return static_cast<std::size_t>(it - files.begin());
        };
        for (const auto& p : m_errors) {
            if (std::find(files.begin(), files.end(), p.error.where->file) == files.end()) {
                files.push_back(p.error.where->file);
            }
        }
        std::stable_sort(m_errors.begin(), m_errors.end(), [&](const Problem& a, const Problem& b) {
            const auto& pa = *a.error.where;
            const auto& pb = *b.error.where;
            return std::make_tuple(a.consequence, rank(pa.file), pa.line, pa.column) <
                   std::make_tuple(b.consequence, rank(pb.file), pb.line, pb.column);
        });
        Error first = std::move(m_errors.front().error);
        for (std::size_t i = 1; i < m_errors.size(); ++i) {
            first.more.push_back(std::move(m_errors[i].error));
        }
        m_errors.clear();
        return first;
    }

private:
    struct Problem {
        Error error{};
        bool consequence = false;
    };

    void push(const toml::source_region& where, std::string field, std::string message, bool consequence) {
        Error e = make_error(ErrorCode::invalid_input, std::move(message), std::move(field));
        e.where = to_pos(where);
        if (std::find(m_override_sources.begin(), m_override_sources.end(), e.where->file) !=
            m_override_sources.end()) {
            e.where->line = 0;
            e.where->column = 0;
        }
        m_errors.push_back({std::move(e), consequence});
    }

    std::vector<Problem> m_errors;
    std::vector<std::string> m_override_sources;
};

std::string join_field(const std::string& prefix, std::string_view key) {
    return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

// A key that is not in its table's list but is near one that is (`sweeps` for `sweep`).
struct Misspelt {
    std::string meant{};
    const toml::node* value = nullptr;
};

// Flags keys of `table` that are not in `known`, with a suggestion; returns the keys that have one.
std::vector<Misspelt> check_keys(const toml::table& table, const std::vector<std::string>& known,
                                 const std::string& prefix, Diagnostics& diag) {
    std::vector<Misspelt> misspelt;
    for (auto&& [key, value] : table) {
        const std::string k(key.str());
        if (std::find(known.begin(), known.end(), k) != known.end()) {
            continue;
        }
        std::string where = prefix.empty() ? "at the top level" : "in [" + prefix + "]";
        std::string msg = "unknown key `" + k + "` " + where;
        if (auto s = util::nearest(k, known)) {
            msg += "; did you mean `" + *s + "`?";
            misspelt.push_back({*s, &value});
        } else {
            msg += "; valid keys are " + util::join(known, ", ");
        }
        // A key inserted by hand has no position; its value has one.
        diag.add(key.source().path ? key.source() : value.source(), join_field(prefix, k), std::move(msg));
    }
    return misspelt;
}

const toml::table* expect_table(const toml::node& node, const std::string& field, Diagnostics& diag) {
    if (const auto* t = node.as_table()) {
        return t;
    }
    diag.add(node, field, "expected a table, got " + type_phrase(node));
    return nullptr;
}

std::optional<std::string> expect_string(const toml::node& node, const std::string& field, Diagnostics& diag,
                                         bool allow_empty = false) {
    const auto* s = node.as_string();
    if (s == nullptr) {
        diag.add(node, field, "expected a string, got " + type_phrase(node));
        return std::nullopt;
    }
    if (!allow_empty && s->get().empty()) {
        diag.add(node, field, "must not be empty");
        return std::nullopt;
    }
    if (auto st = check_no_nul(s->get()); !st) {
        diag.add(node, field, st.error().message);
        return std::nullopt;
    }
    return s->get();
}

std::optional<std::int64_t> expect_integer(const toml::node& node, const std::string& field, Diagnostics& diag,
                                           std::int64_t lo, std::int64_t hi) {
    const auto* i = node.as_integer();
    if (i == nullptr) {
        diag.add(node, field, "expected an integer, got " + type_phrase(node));
        return std::nullopt;
    }
    std::int64_t v = i->get();
    if (v < lo || v > hi) {
        diag.add(node, field,
                 "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got " +
                     std::to_string(v));
        return std::nullopt;
    }
    return v;
}

std::optional<std::vector<std::string>> expect_string_list(const toml::node& node, const std::string& field,
                                                           Diagnostics& diag) {
    const auto* arr = node.as_array();
    if (arr == nullptr) {
        diag.add(node, field, "expected an array of strings, got " + type_phrase(node));
        return std::nullopt;
    }
    std::vector<std::string> out;
    bool ok = true;
    for (std::size_t i = 0; i < arr->size(); ++i) {
        const toml::node& el = *arr->get(i);
        auto s = expect_string(el, field + "[" + std::to_string(i) + "]", diag);
        if (s) {
            out.push_back(std::move(*s));
        } else {
            ok = false;
        }
    }
    if (!ok) {
        return std::nullopt;
    }
    return out;
}

// A quantity given as a string with a unit ("16GiB"); `what` names the kind for messages.
std::optional<std::int64_t> expect_memory(const toml::node& node, const std::string& field, Diagnostics& diag) {
    if (node.is_integer() || node.is_floating_point()) {
        diag.add(node, field, "a size needs a unit: write it as a string like \"16GiB\" or \"512MiB\"");
        return std::nullopt;
    }
    auto s = expect_string(node, field, diag);
    if (!s) {
        return std::nullopt;
    }
    auto mib = res::parse_memory_mib(*s);
    if (!mib) {
        diag.add(node, field, mib.error().message);
        return std::nullopt;
    }
    if (*mib == 0) {
        diag.add(node, field, "must be larger than zero");
        return std::nullopt;
    }
    return *mib;
}

std::optional<std::int64_t> expect_duration(const toml::node& node, const std::string& field, Diagnostics& diag) {
    if (node.is_integer() || node.is_floating_point()) {
        diag.add(node, field, "a duration needs a unit: write it as a string like \"90m\", \"2h\" or \"45s\"");
        return std::nullopt;
    }
    auto s = expect_string(node, field, diag);
    if (!s) {
        return std::nullopt;
    }
    auto secs = res::parse_duration_s(*s);
    if (!secs) {
        diag.add(node, field, secs.error().message);
        return std::nullopt;
    }
    return *secs;
}

// A share in milli-units from an integer, float, or string ("0.25", "25%").
std::optional<std::int64_t> expect_milli(const toml::node& node, const std::string& field, Diagnostics& diag) {
    Result<std::int64_t> r = make_error(ErrorCode::internal, "unset");
    if (const auto* i = node.as_integer()) {
        if (i->get() < 0 || i->get() > 1'000'000) {
            diag.add(node, field, "expected a non-negative number, got " + std::to_string(i->get()));
            return std::nullopt;
        }
        r = i->get() * res::k_milli_per_unit;
    } else if (const auto* f = node.as_floating_point()) {
        r = res::milli_from_double(f->get());
    } else if (const auto* s = node.as_string()) {
        r = res::parse_milli(s->get());
    } else {
        diag.add(node, field, "expected a number like 0.25, got " + type_phrase(node));
        return std::nullopt;
    }
    if (!r) {
        diag.add(node, field, r.error().message);
        return std::nullopt;
    }
    return *r;
}

// Text of a scalar used as a sweep value or env value.
std::optional<std::string> scalar_text(const toml::node& node) {
    if (const auto* s = node.as_string()) {
        return s->get();
    }
    if (const auto* i = node.as_integer()) {
        return std::to_string(i->get());
    }
    if (const auto* f = node.as_floating_point()) {
        return render_float(f->get());
    }
    if (const auto* b = node.as_boolean()) {
        return b->get() ? std::string("true") : std::string("false");
    }
    return std::nullopt;
}

// ---- Placeholders ----------------------------------------------------------------------------
// `{ident}` is a sweep parameter; `{{ident}}` is the literal text `{ident}`; `${ident}` (a shell
// variable) and any other brace are left alone.

struct Placeholder {
    std::size_t begin; // index of '{'
    std::size_t end;   // one past '}'
    std::string name;
    bool escaped;      // written as {{name}}
};

std::vector<Placeholder> find_placeholders(std::string_view s) {
    std::vector<Placeholder> out;
    std::size_t i = 0;
    while (i < s.size()) {
        if (s[i] != '{') {
            ++i;
            continue;
        }
        bool escaped = i + 1 < s.size() && s[i + 1] == '{';
        std::size_t name_begin = escaped ? i + 2 : i + 1;
        std::size_t j = name_begin;
        while (j < s.size() && s[j] != '}' && s[j] != '{') {
            ++j;
        }
        std::string_view name = j < s.size() ? s.substr(name_begin, j - name_begin) : std::string_view();
        bool closed = j < s.size() && s[j] == '}';
        if (closed && util::is_identifier(name)) {
            if (escaped) {
                if (j + 1 < s.size() && s[j + 1] == '}') {
                    out.push_back({i, j + 2, std::string(name), true});
                    i = j + 2;
                    continue;
                }
            } else if (i == 0 || s[i - 1] != '$') {
                out.push_back({i, j + 1, std::string(name), false});
                i = j + 1;
                continue;
            }
        }
        ++i;
    }
    return out;
}

std::string substitute(std::string_view s, const EnvList& params) {
    std::string out;
    std::size_t pos = 0;
    for (const auto& ph : find_placeholders(s)) {
        out.append(s.substr(pos, ph.begin - pos));
        if (ph.escaped) {
            out += "{" + ph.name + "}";
        } else {
            auto it = std::find_if(params.begin(), params.end(), [&](const auto& p) { return p.first == ph.name; });
            if (it != params.end()) {
                out += it->second;
            } else {
                out.append(s.substr(ph.begin, ph.end - ph.begin));
            }
        }
        pos = ph.end;
    }
    out.append(s.substr(pos));
    return out;
}

// `params` are the sweep's parameters; `explained` are names a problem already reported accounts
// for (a parameter with a bad value, one in a misspelt `[sweeps]` table): not reported again.
void check_placeholders(const toml::node& node, std::string_view text, const std::string& field,
                        const std::vector<std::string>& params, const std::vector<std::string>& explained,
                        Diagnostics& diag) {
    for (const auto& ph : find_placeholders(text)) {
        if (ph.escaped || std::find(params.begin(), params.end(), ph.name) != params.end() ||
            std::find(explained.begin(), explained.end(), ph.name) != explained.end()) {
            continue;
        }
        std::string msg = "`{" + ph.name + "}` names no sweep parameter";
        if (auto s = util::nearest(ph.name, params)) {
            msg += "; did you mean `{" + *s + "}`?";
        } else if (params.empty()) {
            msg += " (the recipe has no [sweep])";
        } else {
            msg += "; parameters are " + util::join(params, ", ");
        }
        msg += " (write `{{" + ph.name + "}}` for literal braces)";
        diag.add_consequence(node, field, std::move(msg));
    }
}

// ---- Loading and `extends` -------------------------------------------------------------------

struct Loaded {
    toml::table table;
    std::string source;
    fs::path base_dir;
};

Result<Loaded> parse_toml(std::string_view text, std::string source, fs::path base_dir) {
    try {
        Loaded l{toml::parse(text, source), source, std::move(base_dir)};
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

// Deep merge: keys of `child` override `parent`; tables merge recursively; arrays and scalars are
// replaced. The GPU request is one choice, so a child that sets any of gpu/gpus/gpu_memory drops
// the parent's others. Child nodes are moved, not copied: toml++ keeps a node's source position
// only on move, and error messages need it.
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

struct Loader {
    const ParseOptions& options;
    std::vector<std::string> chain; // sources, outermost first

    Result<Loaded> load(Loaded self, int depth) {
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
        Result<Loaded> parent = make_error(ErrorCode::internal, "unset");
        bool is_path = name->find('/') != std::string::npos || name->ends_with(".toml");
        if (is_path) {
            if (!options.allow_file_access) {
                diag.add(*ext, "extends", "`extends` of a file path is not allowed here; name a built-in recipe");
                return diag.take();
            }
            fs::path p = fs::path(*name).is_absolute() ? fs::path(*name) : self.base_dir / *name;
            std::error_code ec;
            fs::path canon = fs::weakly_canonical(p, ec);
            std::string src = ec ? p.string() : canon.string();
            if (std::find(chain.begin(), chain.end(), src) != chain.end()) {
                diag.add(*ext, "extends", "`extends` forms a cycle through `" + src + "`");
                return diag.take();
            }
            auto text = read_file(p);
            if (!text) {
                diag.add(*ext, "extends", text.error().message);
                return diag.take();
            }
            chain.push_back(src);
            parent = parse_toml(*text, p.string(), p.parent_path());
        } else {
            auto text = builtin_recipe(*name);
            if (!text) {
                std::string msg = "unknown built-in recipe `" + *name + "`";
                auto names = builtin_recipe_names();
                if (auto s = util::nearest(*name, names)) {
                    msg += "; did you mean `" + *s + "`?";
                } else {
                    msg += "; built-ins are " + util::join(names, ", ");
                }
                diag.add(*ext, "extends", std::move(msg));
                return diag.take();
            }
            std::string src = "builtin:" + *name;
            if (std::find(chain.begin(), chain.end(), src) != chain.end()) {
                diag.add(*ext, "extends", "`extends` forms a cycle through `" + src + "`");
                return diag.take();
            }
            chain.push_back(src);
            parent = parse_toml(*text, src, self.base_dir);
        }
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
        merged.source = self.source;
        merged.base_dir = self.base_dir;
        return merged;
    }
};

// ---- Sections --------------------------------------------------------------------------------

void parse_resources(const toml::table& t, Resources& r, Diagnostics& diag) {
    check_keys(t, k_resource_keys, "resources", diag);
    const toml::node* gpu = t.get("gpu");
    const toml::node* gpus = t.get("gpus");
    const toml::node* gpu_memory = t.get("gpu_memory");
    // -1 = not given (or invalid); plain integers keep GCC's flow analysis quiet.
    std::int64_t milli = -1;
    std::int64_t count = -1;
    std::int64_t mem = -1;
    if (gpu != nullptr) {
        auto v = expect_milli(*gpu, "resources.gpu", diag);
        if (v && *v == 0) {
            diag.add(*gpu, "resources.gpu", "a GPU share must be larger than 0; for a CPU-only job write `gpus = 0`");
        } else if (v && *v > res::k_milli_per_unit) {
            diag.add(*gpu, "resources.gpu",
                     "`gpu` is a share of one GPU and must be at most 1 (got " + res::format_milli(*v) +
                         "); jobs run on a single GPU");
        } else if (v) {
            milli = *v;
        }
    }
    if (gpus != nullptr) {
        if (gpus->is_integer() && gpus->as_integer()->get() > 1) {
            diag.add(*gpus, "resources.gpus",
                     "gpupool runs single-GPU jobs: `gpus` must be 0 or 1 (got " +
                         std::to_string(gpus->as_integer()->get()) + ")");
        } else if (auto v = expect_integer(*gpus, "resources.gpus", diag, 0, 1)) {
            count = *v;
        }
    }
    if (gpu_memory != nullptr) {
        if (auto v = expect_memory(*gpu_memory, "resources.gpu_memory", diag)) {
            mem = *v;
        }
    }
    if (gpu != nullptr && gpus != nullptr) {
        diag.add(*gpus, "resources.gpus",
                 "`gpu` and `gpus` are both set; use `gpu` for a share of a GPU or `gpus` for a whole one, not both");
    } else if (gpu != nullptr && gpu_memory != nullptr) {
        diag.add(*gpu_memory, "resources.gpu_memory",
                 "`gpu` and `gpu_memory` are both set; ask for a share (`gpu`) or an amount of memory "
                 "(`gpu_memory`), not both");
    } else if (gpus != nullptr && gpu_memory != nullptr && count == 0) {
        diag.add(*gpu_memory, "resources.gpu_memory", "`gpu_memory` is set but `gpus = 0` asks for no GPU");
    }
    if (milli > 0) {
        r.gpus = 1;
        r.gpu_milli = milli;
    } else if (mem > 0) {
        r.gpus = 1;
        r.gpu_memory_mib = mem;
    } else if (count >= 0) {
        r.gpus = count;
        r.gpu_milli = count == 1 ? res::k_milli_per_unit : 0;
    }
    if (const auto* n = t.get("gpu_models")) {
        if (auto models = expect_string_list(*n, "resources.gpu_models", diag)) {
            const auto* arr = n->as_array();
            for (std::size_t i = 0; i < models->size(); ++i) {
                if (has_control_character((*models)[i])) {
                    diag.add(*arr->get(i), "resources.gpu_models[" + std::to_string(i) + "]",
                             "a GPU model name has no control characters");
                }
            }
            if (models->empty()) {
                diag.add(*n, "resources.gpu_models", "must list at least one GPU model (or be left out)");
            } else if (r.gpus == 0 && gpu == nullptr && gpu_memory == nullptr) {
                diag.add_consequence(
                    *n, "resources.gpu_models",
                    "`gpu_models` is set but the job asks for no GPU; add `gpu`, `gpu_memory` or `gpus = 1`");
            }
            r.gpu_models = std::move(*models);
        }
    }
    if (const auto* n = t.get("cpus")) {
        if (auto cpu = expect_milli(*n, "resources.cpus", diag)) {
            if (*cpu == 0) {
                diag.add(*n, "resources.cpus", "must be larger than 0");
            } else if (*cpu > 1024 * res::k_milli_per_unit) {
                diag.add(*n, "resources.cpus", "must be at most 1024");
            } else {
                r.cpu_milli = *cpu;
            }
        }
    }
    if (const auto* n = t.get("memory")) {
        if (auto v = expect_memory(*n, "resources.memory", diag)) {
            r.memory_mib = *v;
        }
    }
    if (const auto* n = t.get("disk")) {
        if (auto v = expect_memory(*n, "resources.disk", diag)) {
            r.disk_mib = *v;
        }
    }
    if (const auto* n = t.get("max_runtime")) {
        if (auto v = expect_duration(*n, "resources.max_runtime", diag)) {
            r.max_runtime_s = *v;
        }
    }
}

void parse_env(const toml::table& t, EnvList& env, Diagnostics& diag) {
    for (auto&& [key, value] : t) {
        std::string k(key.str());
        std::string field = "env." + k;
        if (auto st = check_env_name(k); !st) {
            diag.add(key.source(), field, st.error().message);
            continue;
        }
        auto text = scalar_text(value);
        if (!text) {
            diag.add(value, field, "expected a string, number or boolean, got " + type_phrase(value));
            continue;
        }
        if (auto st = check_no_nul(*text); !st) {
            diag.add(value, field, st.error().message);
            continue;
        }
        env.emplace_back(k, std::move(*text));
    }
}

std::int64_t tree_bytes(const fs::path& p, std::error_code& ec) {
    if (fs::is_regular_file(p, ec)) {
        return static_cast<std::int64_t>(fs::file_size(p, ec));
    }
    std::int64_t total = 0;
    for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
        if (it->is_regular_file(ec)) {
            total += static_cast<std::int64_t>(it->file_size(ec));
        }
    }
    return total;
}

// True when `real` (symlinks resolved) is `base_dir` (the current directory when empty) or under it.
bool is_within(const fs::path& real, const fs::path& base_dir) {
    std::error_code ec;
    const fs::path base = fs::weakly_canonical(base_dir.empty() ? fs::current_path() : base_dir, ec);
    const fs::path rel = real.lexically_relative(base);
    return !ec && !rel.empty() && *rel.begin() != "..";
}

void parse_inputs(const toml::table& t, Inputs& in, const fs::path& base_dir, const ParseOptions& options,
                  Diagnostics& diag) {
    check_keys(t, k_inputs_keys, "inputs", diag);
    if (const auto* n = t.get("max_size")) {
        if (auto v = expect_memory(*n, "inputs.max_size", diag)) {
            if (*v > k_max_inputs_mib) {
                diag.add(*n, "inputs.max_size",
                         "is larger than the pool's cap of " + res::format_memory_mib(k_max_inputs_mib) +
                             "; put large data in the model cache or fetch it inside the job");
            } else {
                in.max_size_mib = *v;
            }
        }
    }
    const toml::node* paths = t.get("paths");
    if (paths == nullptr) {
        return;
    }
    auto list = expect_string_list(*paths, "inputs.paths", diag);
    if (!list) {
        return;
    }
    in.paths = *list;
    if (!options.allow_file_access) {
        return;
    }
    const auto* arr = paths->as_array();
    for (std::size_t i = 0; i < list->size(); ++i) {
        fs::path p((*list)[i]);
        fs::path full = p.is_absolute() ? p : (base_dir.empty() ? fs::current_path() : base_dir) / p;
        std::error_code ec;
        if (!fs::exists(full, ec)) {
            diag.add(*arr->get(i), "inputs.paths[" + std::to_string(i) + "]",
                     "input `" + (*list)[i] + "` does not exist (looked for " + full.string() + ")");
            continue;
        }
        const fs::path real = fs::weakly_canonical(full, ec);
        if (!options.allow_outside_inputs && !is_within(real, base_dir)) {
            diag.add(*arr->get(i), "inputs.paths[" + std::to_string(i) + "]",
                     "input `" + (*list)[i] + "` is outside the recipe's directory (it is " + real.string() +
                         ") and would be uploaded with the job; move it into the directory, or pass --allow-outside");
            continue;
        }
        in.resolved.push_back(real.string());
        in.total_bytes += tree_bytes(full, ec);
    }
    if (in.total_bytes > in.max_size_mib * 1024 * 1024) {
        diag.add(*paths, "inputs.paths",
                 "inputs add up to " + res::format_memory_mib((in.total_bytes + (1 << 20) - 1) >> 20) +
                     ", more than max_size " + res::format_memory_mib(in.max_size_mib));
    }
}

void parse_outputs(const toml::table& t, Outputs& out, Diagnostics& diag) {
    check_keys(t, k_outputs_keys, "outputs", diag);
    if (const auto* n = t.get("max_size")) {
        if (auto v = expect_memory(*n, "outputs.max_size", diag)) {
            if (*v > k_max_outputs_mib) {
                diag.add(*n, "outputs.max_size", "is larger than the pool's cap of " + res::format_memory_mib(k_max_outputs_mib));
            } else {
                out.max_size_mib = *v;
            }
        }
    }
    if (const auto* n = t.get("paths")) {
        if (auto list = expect_string_list(*n, "outputs.paths", diag)) {
            const auto* arr = n->as_array();
            for (std::size_t i = 0; i < list->size(); ++i) {
                if (auto st = check_output_path((*list)[i]); !st) {
                    diag.add(*arr->get(i), "outputs.paths[" + std::to_string(i) + "]", st.error().message);
                }
            }
            if (list->empty()) {
                diag.add(*n, "outputs.paths", "must list at least one path (or be left out to collect everything)");
            }
            out.paths = std::move(*list);
        }
    }
}

void parse_logs(const toml::table& t, Logs& logs, Diagnostics& diag) {
    check_keys(t, k_logs_keys, "logs", diag);
    if (const auto* n = t.get("max_size")) {
        if (auto v = expect_memory(*n, "logs.max_size", diag)) {
            if (*v > k_max_log_mib) {
                diag.add(*n, "logs.max_size", "is larger than any pool allows (" + res::format_memory_mib(k_max_log_mib) +
                                                  "); the pool's own limit is checked at submit");
            } else {
                logs.max_size_mib = *v;
            }
        }
    }
}

void parse_cache(const toml::table& t, std::vector<std::string>& models, Diagnostics& diag) {
    check_keys(t, k_cache_keys, "cache", diag);
    if (const auto* n = t.get("models")) {
        if (auto list = expect_string_list(*n, "cache.models", diag)) {
            const auto* arr = n->as_array();
            for (std::size_t i = 0; i < list->size(); ++i) {
                if (auto st = check_model_id((*list)[i]); !st) {
                    diag.add(*arr->get(i), "cache.models[" + std::to_string(i) + "]", st.error().message);
                }
            }
            models = std::move(*list);
        }
    }
}

void parse_retry(const toml::table& t, Retry& retry, Diagnostics& diag) {
    check_keys(t, k_retry_keys, "retry", diag);
    if (const auto* n = t.get("max_attempts")) {
        if (auto v = expect_integer(*n, "retry.max_attempts", diag, 1, 20)) {
            retry.max_attempts = *v;
        }
    }
    if (const auto* n = t.get("on_exit_codes")) {
        const auto* arr = n->as_array();
        if (arr == nullptr) {
            diag.add(*n, "retry.on_exit_codes", "expected an array of exit codes, got " + type_phrase(*n));
            return;
        }
        for (std::size_t i = 0; i < arr->size(); ++i) {
            const toml::node& el = *arr->get(i);
            std::string field = "retry.on_exit_codes[" + std::to_string(i) + "]";
            if (el.is_integer() && el.as_integer()->get() == 0) {
                diag.add(el, field, "exit code 0 is success and is never retried");
                continue;
            }
            if (auto v = expect_integer(el, field, diag, 1, 255)) {
                retry.on_exit_codes.push_back(*v);
            }
        }
    }
}

void parse_sweep(const toml::table& t, Sweep& sweep, const ParseOptions& options, Diagnostics& diag) {
    // Parameters in the order they are written (toml++ tables iterate in key order).
    std::vector<std::pair<const toml::key*, const toml::node*>> entries;
    for (auto&& [key, value] : t) {
        entries.emplace_back(&key, &value);
    }
    std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
        const auto& sa = a.first->source().begin;
        const auto& sb = b.first->source().begin;
        return std::tie(sa.line, sa.column) < std::tie(sb.line, sb.column);
    });
    std::uint64_t count = 1;
    bool overflow = false;
    for (const auto& [key, value] : entries) {
        std::string k(key->str());
        std::string field = "sweep." + k;
        if (k == "max_parallel") {
            if (value->is_array()) {
                diag.add(key->source(), field, "`max_parallel` is a setting, not a parameter name; rename the parameter");
            } else if (auto v = expect_integer(*value, field, diag, 1, 1'000'000)) {
                sweep.max_parallel = *v;
            }
            continue;
        }
        if (!util::is_identifier(k)) {
            diag.add(key->source(), field, "sweep parameter names use letters, digits and _ (they are used as `{" + k + "}`)");
            continue;
        }
        const auto* arr = value->as_array();
        if (arr == nullptr) {
            diag.add(*value, field, "expected an array of values to sweep over, got " + type_phrase(*value) +
                                        " (write `" + k + " = [ ... ]`)");
            continue;
        }
        if (arr->empty()) {
            diag.add(*value, field, "a sweep parameter needs at least one value");
            continue;
        }
        SweepParam param{k, {}};
        bool ok = true;
        for (std::size_t i = 0; i < arr->size(); ++i) {
            const toml::node& el = *arr->get(i);
            std::string efield = field + "[" + std::to_string(i) + "]";
            auto text = scalar_text(el);
            if (!text) {
                diag.add(el, efield, "sweep values must be strings, numbers or booleans, got " + type_phrase(el));
                ok = false;
                continue;
            }
            if (auto st = check_no_nul(*text); !st) {
                diag.add(el, efield, st.error().message);
                ok = false;
                continue;
            }
            if (std::find(param.values.begin(), param.values.end(), *text) != param.values.end()) {
                diag.add(el, efield, "duplicate sweep value `" + *text + "` (it would run the same job twice)");
                ok = false;
                continue;
            }
            param.values.push_back(std::move(*text));
        }
        if (!ok) {
            continue;
        }
        if (count > std::numeric_limits<std::uint64_t>::max() / param.values.size()) {
            overflow = true;
        } else {
            count *= param.values.size();
        }
        sweep.params.push_back(std::move(param));
    }
    if (overflow || count > options.max_sweep_jobs) {
        diag.add(t, "sweep",
                 "the sweep expands to " + (overflow ? std::string("more than 2^64") : std::to_string(count)) +
                     " jobs, more than the cap of " + std::to_string(options.max_sweep_jobs) +
                     " (split the sweep, or raise the cap with --max-jobs)");
    }
}

Priority parse_priority(const toml::node& n, Diagnostics& diag) {
    auto s = expect_string(n, "priority", diag);
    if (!s) {
        return Priority::normal;
    }
    if (*s == "low") {
        return Priority::low;
    }
    if (*s == "normal") {
        return Priority::normal;
    }
    if (*s == "high") {
        return Priority::high;
    }
    std::string msg = "expected \"low\", \"normal\" or \"high\", got \"" + *s + "\"";
    if (auto near = util::nearest(*s, {"low", "normal", "high"})) {
        msg += "; did you mean \"" + *near + "\"?";
    }
    diag.add(n, "priority", std::move(msg));
    return Priority::normal;
}

void parse_command(const toml::node& n, JobSpec& job, Diagnostics& diag) {
    if (const auto* s = n.as_string()) {
        if (s->get().find_first_not_of(" \t\n") == std::string::npos) {
            diag.add(n, "command", "must not be empty");
            return;
        }
        if (auto st = check_no_nul(s->get()); !st) {
            diag.add(n, "command", st.error().message);
            return;
        }
        job.shell = true;
        job.command = {s->get()};
        return;
    }
    if (n.is_array()) {
        auto list = expect_string_list(n, "command", diag);
        if (!list) {
            return;
        }
        if (list->empty()) {
            diag.add(n, "command", "must name a program to run (an empty array runs nothing)");
            return;
        }
        job.shell = false;
        job.command = std::move(*list);
        return;
    }
    diag.add(n, "command", "expected an array of arguments or a shell command string, got " + type_phrase(n));
}

// ---- `--set` -------------------------------------------------------------------------------

// `text` as a TOML basic string ("..."), byte for byte.
std::string toml_quoted(std::string_view text) {
    std::string out = "\"";
    for (char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (u < 0x20 || u == 0x7f) {
            std::array<char, 8> buf{};
            std::snprintf(buf.data(), buf.size(), "\\u%04x", static_cast<unsigned>(u));
            out += buf.data();
        } else {
            out += c;
        }
    }
    return out + "\"";
}

std::vector<std::string> split_key_path(const std::string& path) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (true) {
        const std::size_t dot = path.find('.', start);
        parts.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
        if (dot == std::string::npos) {
            return parts;
        }
        start = dot + 1;
    }
}

// True when `parsed` holds nothing but `parts` (a value with a newline could set more than KEY).
bool sets_one_key(const toml::table& parsed, const std::vector<std::string>& parts) {
    const toml::table* level = &parsed;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        const toml::node* next = level == nullptr ? nullptr : level->get(parts[i]);
        if (next == nullptr || level->size() != 1) {
            return false;
        }
        level = next->as_table();
    }
    return true;
}

// `KEY = VALUE` as its own TOML document named `source`, so that every node in it (the tables on
// the way included) carries `source` as its position. VALUE is TOML; text that is not (a bare
// word, `image:tag`) is taken as a string, unless it looks like TOML that went wrong.
Result<toml::table> parse_override(const std::vector<std::string>& parts, const std::string& value,
                                   const std::string& source) {
    std::string key;
    for (const auto& part : parts) {
        key += (key.empty() ? "" : ".") + toml_quoted(part);
    }
    const std::size_t first = value.find_first_not_of(" \t\r\n");
    const bool looks_like_toml =
        first != std::string::npos && std::string_view("[{\"'").find(value[first]) != std::string_view::npos;
    std::string why;
    for (const std::string& text : {value, toml_quoted(value)}) {
        try {
            toml::table parsed = toml::parse(key + " = " + text, std::string_view(source));
            if (!sets_one_key(parsed, parts)) {
                return make_error(ErrorCode::invalid_input, "`--set` takes one value; `" + util::escape_control(value) +
                                                                "` sets more than one key");
            }
            return parsed;
        } catch (const toml::parse_error& e) {
            if (why.empty()) {
                why = std::string(e.description());
            }
            if (looks_like_toml) {
                return make_error(ErrorCode::invalid_input, "`" + util::escape_control(value) +
                                                                "` is not a TOML value (" + why +
                                                                "); quote text that starts with a bracket or a quote");
            }
        }
    }
    return make_error(ErrorCode::invalid_input,
                      "`" + util::escape_control(value) + "` cannot be read as text (" + why + ")");
}

// Lays one `--set path=value` over the recipe's table. The GPU request is one choice, as in
// `extends`: setting one of gpu/gpus/gpu_memory drops the recipe's others.
void apply_override(toml::table& root, const std::string& path, const std::string& value, Diagnostics& diag) {
    const std::string source = "--set " + path;
    diag.add_override_source(source);
    const std::vector<std::string> parts = split_key_path(path);
    if (std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); })) {
        diag.add_plain(source, path, "`--set` needs a key path like resources.gpu=0.5");
        return;
    }
    auto parsed = parse_override(parts, value, source);
    if (!parsed) {
        diag.add_plain(source, path, parsed.error().message);
        return;
    }
    toml::table* target = &root;
    toml::table* from = &*parsed;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
        auto it = from->find(parts[i]);
        toml::node* existing = target->get(parts[i]);
        if (existing == nullptr) {
            // Nothing there yet: the rest of the path comes over with its position.
            target->insert_or_assign(it->first, std::move(*it->second.as_table()));
            return;
        }
        if (!existing->is_table()) {
            std::vector<std::string> here(parts.begin(), parts.begin() + static_cast<std::ptrdiff_t>(i) + 1);
            diag.add_plain(source, path,
                           "`" + util::join(here, ".") + "` is " + type_phrase(*existing) +
                               " in the recipe, not a table, so it has no `" + parts[i + 1] + "`");
            return;
        }
        target = existing->as_table();
        from = it->second.as_table();
    }
    if (parts.size() == 2 && parts[0] == "resources" &&
        std::find(k_gpu_choice.begin(), k_gpu_choice.end(), parts[1]) != k_gpu_choice.end()) {
        for (const auto& k : k_gpu_choice) {
            target->erase(k);
        }
    }
    auto it = from->find(parts.back());
    it->second.visit([&, &k = it->first](auto& v) { target->insert_or_assign(k, std::move(v)); });
}

// ---- The recipe as a whole -------------------------------------------------------------------

// What the top level's misspelt keys account for: a required key they were meant to be, and the
// placeholders a misspelt `[sweep]` would have defined.
struct Explained {
    std::vector<std::string> keys{};
    std::vector<std::string> placeholders{};

    bool has_key(std::string_view key) const { return std::find(keys.begin(), keys.end(), key) != keys.end(); }
};

Explained explained_by(const std::vector<Misspelt>& misspelt, const toml::table& root) {
    Explained out;
    auto add_names = [&out](const toml::node* table) {
        if (table != nullptr && table->is_table()) {
            for (auto&& [key, value] : *table->as_table()) {
                if (key.str() != "max_parallel") {
                    out.placeholders.emplace_back(key.str());
                }
            }
        }
    };
    for (const auto& m : misspelt) {
        out.keys.push_back(m.meant);
        if (m.meant == "sweep") {
            add_names(m.value);
        }
    }
    // A parameter of [sweep] with a bad value has its own error.
    add_names(root.get("sweep"));
    return out;
}

void parse_name(const toml::table& root, const std::string& source, JobSpec& job, Diagnostics& diag) {
    if (const auto* n = root.get("name")) {
        if (auto s = expect_string(*n, "name", diag)) {
            if (s->size() > 200) {
                diag.add(*n, "name", "must be at most 200 characters");
            } else if (std::any_of(s->begin(), s->end(), [](char c) { return std::iscntrl(static_cast<unsigned char>(c)) != 0; })) {
                diag.add(*n, "name", "must not contain control characters");
            } else {
                job.name = *s;
            }
        }
    } else {
        job.name = fs::path(source).stem().string();
        if (job.name.empty()) {
            job.name = "job";
        }
    }
}

// The top-level scalars: format, name, description, image, command, priority.
void parse_top(const toml::table& root, const std::string& source, const Explained& explained, JobSpec& job,
               Diagnostics& diag) {
    if (const auto* n = root.get("format")) {
        if (!n->is_integer() || n->as_integer()->get() != 1) {
            diag.add(*n, "format", "this gpupool reads recipe format 1 (`format = 1`)");
        }
    }
    parse_name(root, source, job, diag);
    if (const auto* n = root.get("description")) {
        expect_string(*n, "description", diag, true);
    }
    if (const auto* n = root.get("image")) {
        if (const auto* s = n->as_string(); s != nullptr && !s->get().empty()) {
            // Not expect_string: the image has its own messages for every bad byte, NUL included.
            if (auto st = validate_image_reference(s->get()); !st) {
                diag.add(*n, "image", st.error().message);
            } else {
                job.image = s->get();
            }
        } else {
            expect_string(*n, "image", diag);
        }
    } else if (!explained.has_key("image")) {
        diag.add_plain(source, "image", "missing required key `image` (the container image to run)", true);
    }
    if (const auto* n = root.get("command")) {
        parse_command(*n, job, diag);
    } else if (!explained.has_key("command")) {
        diag.add_plain(source, "command", "missing required key `command` (what to run in the container)", true);
    }
    if (const auto* n = root.get("priority")) {
        job.priority = parse_priority(*n, diag);
    }
}

void parse_tables(const toml::table& root, const fs::path& base_dir, const ParseOptions& options, Recipe& recipe,
                  Diagnostics& diag) {
    JobSpec& job = recipe.base;
    if (const auto* n = root.get("resources")) {
        if (const auto* t = expect_table(*n, "resources", diag)) {
            parse_resources(*t, job.resources, diag);
        }
    }
    if (const auto* n = root.get("env")) {
        if (const auto* t = expect_table(*n, "env", diag)) {
            parse_env(*t, job.env, diag);
        }
    }
    if (const auto* n = root.get("inputs")) {
        if (const auto* t = expect_table(*n, "inputs", diag)) {
            parse_inputs(*t, job.inputs, base_dir, options, diag);
        }
    }
    if (const auto* n = root.get("outputs")) {
        if (const auto* t = expect_table(*n, "outputs", diag)) {
            parse_outputs(*t, job.outputs, diag);
        }
    }
    if (const auto* n = root.get("logs")) {
        if (const auto* t = expect_table(*n, "logs", diag)) {
            parse_logs(*t, job.logs, diag);
        }
    }
    if (const auto* n = root.get("cache")) {
        if (const auto* t = expect_table(*n, "cache", diag)) {
            parse_cache(*t, job.cache_models, diag);
        }
    }
    if (const auto* n = root.get("retry")) {
        if (const auto* t = expect_table(*n, "retry", diag)) {
            parse_retry(*t, job.retry, diag);
        }
    }
    if (const auto* n = root.get("sweep")) {
        if (const auto* t = expect_table(*n, "sweep", diag)) {
            parse_sweep(*t, recipe.sweep, options, diag);
        }
    }
}

// Placeholders may only name sweep parameters.
void check_all_placeholders(const toml::table& root, const Recipe& recipe, const Explained& explained,
                            Diagnostics& diag) {
    std::vector<std::string> names;
    for (const auto& p : recipe.sweep.params) {
        names.push_back(p.name);
    }
    const std::vector<std::string>& known = explained.placeholders;
    if (const auto* n = root.get("name"); n != nullptr && n->is_string()) {
        check_placeholders(*n, n->as_string()->get(), "name", names, known, diag);
        // The name holds no control characters, and neither may the values put into it.
        for (const auto& ph : find_placeholders(n->as_string()->get())) {
            for (const auto& p : recipe.sweep.params) {
                const bool bad = !ph.escaped && p.name == ph.name &&
                                 std::any_of(p.values.begin(), p.values.end(),
                                             [](const std::string& v) { return has_control_character(v); });
                if (bad) {
                    diag.add(*n, "name",
                             "`{" + p.name + "}` has a sweep value with a control character; a job name has none");
                }
            }
        }
    }
    if (const auto* n = root.get("command")) {
        if (const auto* s = n->as_string()) {
            check_placeholders(*n, s->get(), "command", names, known, diag);
        } else if (const auto* arr = n->as_array()) {
            for (std::size_t i = 0; i < arr->size(); ++i) {
                if (const auto* s2 = arr->get(i)->as_string()) {
                    check_placeholders(*arr->get(i), s2->get(), "command[" + std::to_string(i) + "]", names, known,
                                       diag);
                }
            }
        }
    }
    if (const auto* env = root.get("env"); env != nullptr && env->is_table()) {
        for (auto&& [key, value] : *env->as_table()) {
            if (const auto* s = value.as_string()) {
                check_placeholders(value, s->get(), "env." + std::string(key.str()), names, known, diag);
            }
        }
    }
}

Result<Recipe> build(Loaded loaded, std::vector<std::string> chain, const ParseOptions& options) {
    Diagnostics diag;
    toml::table& root = loaded.table;
    for (const auto& [path, value] : options.overrides) {
        apply_override(root, path, value, diag);
    }
    Recipe recipe;
    recipe.source = loaded.source;
    recipe.extends = std::move(chain);

    const Explained explained = explained_by(check_keys(root, k_top_keys, "", diag), root);
    parse_top(root, loaded.source, explained, recipe.base, diag);
    parse_tables(root, loaded.base_dir, options, recipe, diag);
    check_all_placeholders(root, recipe, explained, diag);

    if (!diag.empty()) {
        return diag.take();
    }
    return recipe;
}

} // namespace

Result<Recipe> parse_recipe_text(std::string_view text, std::string_view source_name, const ParseOptions& options,
                                 const std::filesystem::path& base_dir) {
    auto loaded = parse_toml(text, std::string(source_name), base_dir);
    if (!loaded) {
        return loaded.error();
    }
    Loader loader{options, {std::string(source_name)}};
    auto resolved = loader.load(std::move(*loaded), 0);
    if (!resolved) {
        return resolved.error();
    }
    std::vector<std::string> chain(loader.chain.begin() + 1, loader.chain.end());
    return build(std::move(*resolved), std::move(chain), options);
}

Result<Recipe> parse_recipe_file(const std::filesystem::path& path, const ParseOptions& options) {
    auto text = read_file(path);
    if (!text) {
        return text.error();
    }
    return parse_recipe_text(*text, path.string(), options, path.parent_path());
}

Result<std::vector<JobSpec>> expand(const Recipe& recipe, const ParseOptions& options) {
    const std::uint64_t count = recipe.sweep.job_count();
    if (count > options.max_sweep_jobs) {
        Error e = make_error(ErrorCode::invalid_input,
                             "the sweep expands to " + std::to_string(count) + " jobs, more than the cap of " +
                                 std::to_string(options.max_sweep_jobs),
                             "sweep");
        e.where = SourcePos{recipe.source, 0, 0};
        return e;
    }
    const bool name_has_params = !find_placeholders(recipe.base.name).empty();
    std::vector<JobSpec> jobs;
    jobs.reserve(count);
    const auto& params = recipe.sweep.params;
    std::vector<std::size_t> idx(params.size(), 0);
    for (std::uint64_t n = 0; n < count; ++n) {
        JobSpec job = recipe.base;
        job.sweep_index = static_cast<std::int64_t>(n);
        for (std::size_t p = 0; p < params.size(); ++p) {
            job.params.emplace_back(params[p].name, params[p].values[idx[p]]);
        }
        job.name = substitute(recipe.base.name, job.params);
        if (!params.empty() && !name_has_params && count > 1) {
            job.name += "-" + std::to_string(n);
        }
        for (auto& arg : job.command) {
            arg = substitute(arg, job.params);
        }
        for (auto& [k, v] : job.env) {
            v = substitute(v, job.params);
        }
        jobs.push_back(std::move(job));
        // Row-major: the last parameter varies fastest.
        for (std::size_t p = params.size(); p-- > 0;) {
            if (++idx[p] < params[p].values.size()) {
                break;
            }
            idx[p] = 0;
        }
    }
    return jobs;
}

Result<std::vector<JobSpec>> load_jobs(const std::filesystem::path& path, const ParseOptions& options) {
    auto recipe = parse_recipe_file(path, options);
    if (!recipe) {
        return recipe.error();
    }
    return expand(*recipe, options);
}

} // namespace gpupool::recipe

#include "core/recipe/field_rules.hpp"
#include "core/recipe/image_ref.hpp"
#include "core/recipe/sections.hpp"
#include "core/recipe/toml_values.hpp"
#include "core/util/strings.hpp"

#include <algorithm>
#include <cctype>

namespace gpupool::recipe::detail {

namespace {

namespace fs = std::filesystem;

const std::vector<std::string> k_retry_keys{"max_attempts", "on_exit_codes"};
const std::vector<std::string> k_checkpoint_keys{"every", "grace"};
const std::vector<std::string> k_verify_keys{"compare", "tolerance", "files"};

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
        // A recipe in a repository is `NAME/recipe.toml`: its jobs are called after the folder.
        const fs::path file(source);
        job.name = file.stem() == "recipe" && file.has_parent_path() ? file.parent_path().filename().string()
                                                                     : file.stem().string();
        if (job.name.empty()) {
            job.name = "job";
        }
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

} // namespace

bool Explained::has_key(std::string_view key) const {
    return std::find(keys.begin(), keys.end(), key) != keys.end();
}

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

void parse_env(const toml::table& t, EnvList& env, const SourceTexts& texts, Diagnostics& diag) {
    for (auto&& [key, value] : t) {
        std::string k(key.str());
        std::string field = "env." + k;
        if (auto st = check_env_name(k); !st) {
            diag.add(key.source(), field, st.error().message);
            continue;
        }
        auto text = scalar_text(value, texts);
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

void parse_tags(const toml::node& n, std::vector<std::string>& tags, Diagnostics& diag) {
    constexpr std::size_t k_max_tags = 16;
    constexpr std::size_t k_max_tag = 32;
    auto list = expect_string_list(n, "tags", diag);
    if (!list) {
        return;
    }
    if (list->size() > k_max_tags) {
        diag.add(n, "tags", "at most " + std::to_string(k_max_tags) + " tags");
        return;
    }
    for (std::size_t i = 0; i < list->size(); ++i) {
        const std::string& t = (*list)[i];
        const bool word =
            !t.empty() && t.size() <= k_max_tag && t.front() != '-' && std::all_of(t.begin(), t.end(), [](char c) {
                return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
            });
        if (!word) {
            diag.add(*n.as_array()->get(i), "tags[" + std::to_string(i) + "]",
                     "a tag is 1 to " + std::to_string(k_max_tag) +
                         " lowercase letters, digits and `-`, not starting with `-`");
            continue;
        }
        if (std::find(tags.begin(), tags.end(), t) == tags.end()) {
            tags.push_back(t);
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

void parse_checkpoint(const toml::table& t, Checkpoint& checkpoint, Diagnostics& diag) {
    check_keys(t, k_checkpoint_keys, "checkpoint", diag);
    const auto* every = t.get("every");
    if (every == nullptr) {
        diag.add(t, "checkpoint.every", "missing: how often the job saves its progress (e.g. \"10m\")");
    } else if (auto v = expect_duration(*every, "checkpoint.every", diag)) {
        if (*v < 1) {
            diag.add(*every, "checkpoint.every", "must be at least 1s");
        } else {
            checkpoint.every_s = *v;
        }
    }
    checkpoint.grace_s = k_default_checkpoint_grace_s;
    if (const auto* n = t.get("grace")) {
        if (auto v = expect_duration(*n, "checkpoint.grace", diag)) {
            if (*v > k_max_checkpoint_grace_s) {
                diag.add(*n, "checkpoint.grace", "must be at most " + std::to_string(k_max_checkpoint_grace_s / 60) +
                                                     " minutes (the time a stopped job has to save)");
            } else {
                checkpoint.grace_s = *v;
            }
        }
    }
}

void parse_verify(const toml::table& t, Verify& verify, Diagnostics& diag) {
    check_keys(t, k_verify_keys, "verify", diag);
    if (const auto* n = t.get("compare")) {
        if (auto v = expect_string(*n, "verify.compare", diag)) {
            if (auto m = compare_mode_from_string(*v)) {
                verify.compare = *m;
            } else {
                diag.add(*n, "verify.compare", "must be \"exact\", \"json\" or \"none\", not \"" + *v + "\"");
            }
        }
    }
    if (const auto* n = t.get("tolerance")) {
        const bool number = n->is_floating_point() || n->is_integer();
        const double v = n->is_floating_point() ? n->as_floating_point()->get()
                         : n->is_integer()      ? static_cast<double>(n->as_integer()->get())
                                                : 0.0;
        if (!number) {
            diag.add(*n, "verify.tolerance", "expected a number, got " + type_phrase(*n));
        } else if (!(v >= 0.0 && v <= k_max_verify_tolerance)) {
            diag.add(*n, "verify.tolerance", "must be from 0 to 1 (a relative difference: 1e-3 is 0.1 %)");
        } else if (verify.compare != CompareMode::json) {
            diag.add(*n, "verify.tolerance", "applies to compare = \"json\" only (numbers in JSON outputs)");
        } else {
            verify.tolerance = v;
        }
    }
    if (const auto* n = t.get("files")) {
        if (auto list = expect_string_list(*n, "verify.files", diag)) {
            const auto* arr = n->as_array();
            if (list->size() > k_max_verify_files) {
                diag.add(*n, "verify.files",
                         "lists " + std::to_string(list->size()) + " paths; at most " +
                             std::to_string(k_max_verify_files));
            }
            for (std::size_t i = 0; i < list->size() && i < k_max_verify_files; ++i) {
                if (auto st = check_output_path((*list)[i]); !st) {
                    diag.add(*arr->get(i), "verify.files[" + std::to_string(i) + "]", st.error().message);
                } else {
                    verify.files.push_back((*list)[i]);
                }
            }
        }
    }
}

} // namespace gpupool::recipe::detail

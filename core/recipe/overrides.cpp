#include "core/recipe/sections.hpp"
#include "core/recipe/toml_values.hpp"
#include "core/util/strings.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>

// `--set KEY=VALUE`: one override laid over the recipe's table before it is read.
namespace gpupool::recipe::detail {

namespace {

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
// the way included) carries `source` as its position; the document's text goes into `texts`.
// VALUE is TOML; text that is not (a bare word, `image:tag`) is taken as a string, unless it looks
// like TOML that went wrong.
Result<toml::table> parse_override(const std::vector<std::string>& parts, const std::string& value,
                                   const std::string& source, SourceTexts& texts) {
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
            std::string document = key + " = " + text;
            toml::table parsed = toml::parse(document, std::string_view(source));
            if (!sets_one_key(parsed, parts)) {
                return make_error(ErrorCode::invalid_input, "`--set` takes one value; `" + util::escape_control(value) +
                                                                "` sets more than one key");
            }
            texts.insert_or_assign(source, std::move(document));
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

} // namespace

void apply_override(toml::table& root, const std::string& path, const std::string& value, SourceTexts& texts,
                    Diagnostics& diag) {
    const std::string source = "--set " + path;
    diag.add_override_source(source);
    const std::vector<std::string> parts = split_key_path(path);
    if (std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); })) {
        diag.add_plain(source, path, "`--set` needs a key path like resources.gpu=0.5");
        return;
    }
    auto parsed = parse_override(parts, value, source, texts);
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

} // namespace gpupool::recipe::detail

#include "core/recipe/placeholders.hpp"

#include "core/util/strings.hpp"

#include <algorithm>

namespace gpupool::recipe::detail {

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

} // namespace gpupool::recipe::detail

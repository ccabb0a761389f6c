#include "core/recipe/diagnostics.hpp"

#include "core/util/strings.hpp"

#include <algorithm>
#include <tuple>

namespace gpupool::recipe::detail {

SourcePos to_pos(const toml::source_region& r) {
    SourcePos pos;
    if (r.path) {
        pos.file = *r.path;
    }
    pos.line = r.begin.line;
    pos.column = r.begin.column;
    return pos;
}

void Diagnostics::add_plain(std::string file, std::string field, std::string message, bool consequence) {
    Error e = make_error(ErrorCode::invalid_input, std::move(message), std::move(field));
    e.where = SourcePos{std::move(file), 0, 0};
    m_errors.push_back({std::move(e), consequence});
}

Error Diagnostics::take() {
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
    // Sorts positions rather than the problems themselves: the same stable order, and GCC's flow
    // analysis does not follow optionals through stable_sort's buffer.
    std::vector<std::size_t> order(m_errors.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        order[i] = i;
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t ia, std::size_t ib) {
        const Problem& a = m_errors[ia];
        const Problem& b = m_errors[ib];
        const auto& pa = *a.error.where;
        const auto& pb = *b.error.where;
        return std::make_tuple(a.consequence, rank(pa.file), pa.line, pa.column) <
               std::make_tuple(b.consequence, rank(pb.file), pb.line, pb.column);
    });
    Error first = std::move(m_errors[order.front()].error);
    for (std::size_t i = 1; i < order.size(); ++i) {
        first.more.push_back(std::move(m_errors[order[i]].error));
    }
    m_errors.clear();
    return first;
}

void Diagnostics::push(const toml::source_region& where, std::string field, std::string message, bool consequence) {
    Error e = make_error(ErrorCode::invalid_input, std::move(message), std::move(field));
    e.where = to_pos(where);
    if (std::find(m_override_sources.begin(), m_override_sources.end(), e.where->file) !=
        m_override_sources.end()) {
        e.where->line = 0;
        e.where->column = 0;
    }
    m_errors.push_back({std::move(e), consequence});
}

std::string join_field(const std::string& prefix, std::string_view key) {
    return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

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

} // namespace gpupool::recipe::detail

#include "core/credits/catalog.hpp"

#include "core/resources/quantity.hpp"

#include <toml++/toml.h>

#include <cmath>

namespace gpupool::credits {

namespace {

Error at(const toml::source_region& r, const std::string& source, const std::string& field, const std::string& msg) {
    Error e = make_error(ErrorCode::invalid_input, msg, field);
    SourcePos pos;
    pos.file = r.path ? std::string(*r.path) : source;
    pos.line = r.begin.line;
    pos.column = r.begin.column;
    e.where = pos;
    return e;
}

Result<toml::table> parse(std::string_view text, const std::string& source) {
    try {
        return toml::parse(text, source);
    } catch (const toml::parse_error& e) {
        return at(e.source(), source, "", "TOML syntax error: " + std::string(e.description()));
    }
}

// A credits or dollars amount: a decimal string ("2.5", exact) or a number (rounded to 0.000001).
Result<Micro> amount(const toml::node* n, const toml::source_region& parent, const std::string& source,
                     const std::string& field) {
    if (n == nullptr) {
        return at(parent, source, field, "missing; expected an amount like \"2.5\"");
    }
    if (auto s = n->value<std::string>()) {
        auto v = parse_credits(*s);
        if (!v) {
            return at(n->source(), source, field, v.error().message);
        }
        return *v;
    }
    if (n->is_integer() || n->is_floating_point()) {
        const double d = n->value<double>().value_or(-1.0);
        if (d < 0 || d > 1e12) {
            return at(n->source(), source, field, "expected a non-negative amount");
        }
        return static_cast<Micro>(std::llround(d * static_cast<double>(k_micro_per_credit)));
    }
    return at(n->source(), source, field, "expected an amount like \"2.5\"");
}

Result<std::string> text_field(const toml::table& t, const char* key, const std::string& source,
                               const std::string& prefix, bool required = true) {
    const toml::node* n = t.get(key);
    if (n == nullptr) {
        if (!required) {
            return std::string();
        }
        return at(t.source(), source, prefix + key, "missing; expected a string");
    }
    auto s = n->value<std::string>();
    if (!s || s->empty()) {
        return at(n->source(), source, prefix + key, "expected a non-empty string");
    }
    return *s;
}

} // namespace

Result<RateCatalog> parse_rate_catalog(std::string_view toml_text, const std::string& source) {
    auto doc = parse(toml_text, source);
    if (!doc) {
        return doc.error();
    }
    RateCatalog cat;
    cat.source = source;
    if (const toml::table* d = doc->get_as<toml::table>("defaults")) {
        if (d->get("unknown_gpu_credits_per_hour") != nullptr) {
            auto v = amount(d->get("unknown_gpu_credits_per_hour"), d->source(), source,
                            "defaults.unknown_gpu_credits_per_hour");
            if (!v) {
                return v.error();
            }
            cat.default_micro_per_gpu_hour = *v;
        }
        if (d->get("cpu_credits_per_core_hour") != nullptr) {
            auto v =
                amount(d->get("cpu_credits_per_core_hour"), d->source(), source, "defaults.cpu_credits_per_core_hour");
            if (!v) {
                return v.error();
            }
            cat.cpu_micro_per_core_hour = *v;
        }
    }
    const toml::node* gpus = doc->get("gpu");
    if (gpus == nullptr) {
        return at(doc->source(), source, "gpu", "missing; expected [[gpu]] tables");
    }
    const toml::array* arr = gpus->as_array();
    if (arr == nullptr) {
        return at(gpus->source(), source, "gpu", "expected [[gpu]] tables");
    }
    for (std::size_t i = 0; i < arr->size(); ++i) {
        const std::string prefix = "gpu[" + std::to_string(i) + "].";
        const toml::table* t = (*arr)[i].as_table();
        if (t == nullptr) {
            return at((*arr)[i].source(), source, "gpu[" + std::to_string(i) + "]", "expected a table");
        }
        GpuRate g;
        auto model = text_field(*t, "model", source, prefix);
        if (!model) {
            return model.error();
        }
        g.model = *model;
        if (cat.find(g.model) != nullptr && cat.find(g.model)->model == g.model) {
            return at(t->source(), source, prefix + "model", "model `" + g.model + "` is listed twice");
        }
        if (const toml::node* al = t->get("aliases")) {
            const toml::array* a = al->as_array();
            if (a == nullptr) {
                return at(al->source(), source, prefix + "aliases", "expected an array of strings");
            }
            for (const auto& x : *a) {
                auto s = x.value<std::string>();
                if (!s) {
                    return at(x.source(), source, prefix + "aliases", "expected an array of strings");
                }
                g.aliases.push_back(*s);
            }
        }
        auto mem = text_field(*t, "memory", source, prefix);
        if (!mem) {
            return mem.error();
        }
        auto mib = resources::parse_memory_mib(*mem);
        if (!mib) {
            return at(t->get("memory")->source(), source, prefix + "memory", mib.error().message);
        }
        g.memory_mib = *mib;
        auto rate = amount(t->get("credits_per_hour"), t->source(), source, prefix + "credits_per_hour");
        if (!rate) {
            return rate.error();
        }
        g.micro_per_gpu_hour = *rate;
        cat.gpus.push_back(std::move(g));
    }
    return cat;
}

Result<PriceCatalog> parse_price_catalog(std::string_view toml_text, const std::string& source) {
    auto doc = parse(toml_text, source);
    if (!doc) {
        return doc.error();
    }
    PriceCatalog cat;
    auto as_of = text_field(*doc, "as_of", source, "");
    if (!as_of) {
        return as_of.error();
    }
    cat.as_of = *as_of;
    const toml::array* arr = doc->get_as<toml::array>("price");
    if (arr == nullptr) {
        return at(doc->source(), source, "price", "missing; expected [[price]] tables");
    }
    for (std::size_t i = 0; i < arr->size(); ++i) {
        const std::string prefix = "price[" + std::to_string(i) + "].";
        const toml::table* t = (*arr)[i].as_table();
        if (t == nullptr) {
            return at((*arr)[i].source(), source, "price[" + std::to_string(i) + "]", "expected a table");
        }
        CloudPrice p;
        for (auto [key, out] : {std::pair{"provider", &p.provider}, std::pair{"offering", &p.offering},
                                std::pair{"gpu", &p.gpu}, std::pair{"date", &p.date}, std::pair{"source", &p.source}}) {
            auto v = text_field(*t, key, source, prefix);
            if (!v) {
                return v.error();
            }
            *out = *v;
        }
        if (!p.source.starts_with("https://")) {
            return at(t->get("source")->source(), source, prefix + "source",
                      "expected the https:// page the figure came from");
        }
        auto usd = amount(t->get("usd_per_gpu_hour"), t->source(), source, prefix + "usd_per_gpu_hour");
        if (!usd) {
            return usd.error();
        }
        p.micro_usd_per_gpu_hour = *usd;
        cat.prices.push_back(std::move(p));
    }
    return cat;
}

const RateCatalog& default_rate_catalog() {
    static const RateCatalog k_catalog =
        parse_rate_catalog(embedded_rate_catalog_text(), "core/resources/gpus.toml").value();
    return k_catalog;
}

const PriceCatalog& default_price_catalog() {
    static const PriceCatalog k_catalog =
        parse_price_catalog(embedded_price_catalog_text(), "data/prices.toml").value();
    return k_catalog;
}

} // namespace gpupool::credits

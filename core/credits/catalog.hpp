// Reading the two catalogs credits depend on: the GPU rate catalog (core/resources/gpus.toml) and
// the dated cloud price catalog (data/prices.toml). Both files are embedded in the binary; an
// operator may load others. This is the toml++ adapter: bad input becomes an Error naming the
// file, line and field (toml++ source positions), never an exception. Pure and thread-safe.
#pragma once

#include "core/credits/rates.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace gpupool::credits {

// One on-demand cloud offer, per GPU-hour, in micro-dollars.
struct CloudPrice {
    std::string provider;
    std::string offering;
    std::string gpu; // a model of the rate catalog
    Micro micro_usd_per_gpu_hour = 0;
    std::string date;
    std::string source;
};

struct PriceCatalog {
    std::string as_of;
    std::vector<CloudPrice> prices;
};

Result<RateCatalog> parse_rate_catalog(std::string_view toml_text, const std::string& source);
Result<PriceCatalog> parse_price_catalog(std::string_view toml_text, const std::string& source);

// The embedded catalogs (asserted valid by the tests).
const RateCatalog& default_rate_catalog();
const PriceCatalog& default_price_catalog();
std::string_view embedded_rate_catalog_text();
std::string_view embedded_price_catalog_text();

} // namespace gpupool::credits

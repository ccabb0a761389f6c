#include "worker/owner/pause_file.hpp"

#include "core/util/files.hpp"
#include "core/util/time_text.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <sstream>

namespace gpupool::worker {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* const k_pause_file = "paused";
constexpr std::size_t k_max_why = 200;
constexpr std::size_t k_max_file = 4096;

std::int64_t system_now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

} // namespace

std::optional<PauseRecord> read_pause(const fs::path& work_dir) {
    std::ifstream in(work_dir / k_pause_file, std::ios::binary);
    if (!in) {
        return std::nullopt;
    }
    std::string text(k_max_file, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(in.gcount()));
    PauseRecord r;
    const json j = json::parse(text, nullptr, false);
    if (j.is_object()) {
        const auto num = [&](const char* key) -> std::optional<std::int64_t> {
            auto it = j.find(key);
            return it != j.end() && it->is_number_integer() ? std::optional(it->get<std::int64_t>()) : std::nullopt;
        };
        r.since_ms = num("since_ms").value_or(0);
        r.until_ms = num("until_ms");
        if (auto it = j.find("why"); it != j.end() && it->is_string()) {
            r.why = it->get<std::string>().substr(0, k_max_why);
        }
        return r;
    }
    // The one-line form of earlier versions: "<when UTC>[: why]".
    std::istringstream lines(text);
    std::getline(lines, r.why);
    r.why = r.why.substr(0, k_max_why);
    return r;
}

std::optional<PauseRecord> pause_in_force(const fs::path& work_dir, std::int64_t now_ms) {
    auto r = read_pause(work_dir);
    if (r && r->until_ms && *r->until_ms <= now_ms) {
        return std::nullopt;
    }
    return r;
}

Status pause_sharing(const fs::path& work_dir, const std::string& why, std::optional<std::int64_t> until_ms) {
    std::error_code ec;
    fs::create_directories(work_dir, ec);
    json j{{"since_ms", system_now_ms()}, {"why", why.substr(0, k_max_why)}};
    if (until_ms) {
        j["until_ms"] = *until_ms;
    }
    return util::write_private_file(work_dir / k_pause_file, j.dump() + "\n");
}

Status resume_sharing(const fs::path& work_dir) {
    std::error_code ec;
    fs::remove(work_dir / k_pause_file, ec);
    if (ec) {
        return make_error(ErrorCode::io, "cannot remove " + (work_dir / k_pause_file).string() + ": " + ec.message());
    }
    return {};
}

std::optional<std::string> paused_since(const fs::path& work_dir) {
    auto r = pause_in_force(work_dir, system_now_ms());
    if (!r) {
        return std::nullopt;
    }
    if (r->since_ms == 0) {
        return r->why; // the one-line form already says when
    }
    std::string text = util::utc_text_zoned(r->since_ms);
    if (!r->why.empty()) {
        text += ": " + r->why;
    }
    if (r->until_ms) {
        text += " (until " + util::utc_text_zoned(*r->until_ms) + ")";
    }
    return text;
}

} // namespace gpupool::worker

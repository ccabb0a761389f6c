#include "worker/owner/owner_desk.hpp"

#include <spdlog/spdlog.h>

namespace gpupool::worker {

using nlohmann::json;

namespace {
constexpr auto k_answer_wait = std::chrono::seconds(5);
} // namespace

Status OwnerDesk::open(const std::filesystem::path& work_dir, std::function<void()> wake) {
    m_wake = std::move(wake);
    auto server = ControlServer::start(work_dir, [this](const json& req) {
        auto answer = post(req, true)->get_future();
        if (answer.wait_for(k_answer_wait) != std::future_status::ready) {
            return json{{"ok", false}, {"error", "the worker is busy: try again"}};
        }
        return answer.get();
    });
    if (!server && server.error().code == ErrorCode::conflict) {
        return server.error();
    }
    if (!server) {
        spdlog::warn("no owner controls ({}): `gpupool worker pause/resume` still work through the files",
                     server.error().message);
        return {};
    }
    m_server = std::move(*server);
    return {};
}

void OwnerDesk::close() {
    m_server.reset();
    answer_all([](const json&) { return json{{"ok", false}, {"error", "the worker is stopping"}}; });
}

std::shared_ptr<std::promise<json>> OwnerDesk::post(json request, bool wait) {
    auto reply = wait ? std::make_shared<std::promise<json>>() : nullptr;
    {
        util::MutexLock lock(m_mu);
        m_queue.push_back({std::move(request), reply});
        m_pending = true;
    }
    if (m_wake) {
        m_wake();
    }
    return reply;
}

std::size_t OwnerDesk::answer_all(const std::function<json(const json&)>& answer) {
    std::vector<PendingRequest> todo;
    {
        util::MutexLock lock(m_mu);
        todo.swap(m_queue);
        m_pending = false;
    }
    for (auto& p : todo) {
        json reply = answer(p.request);
        if (p.reply) {
            p.reply->set_value(std::move(reply));
        }
    }
    return todo.size();
}

} // namespace gpupool::worker

#include "worker/owner/owner_desk.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace gpupool::worker {

using nlohmann::json;

Status OwnerDesk::open(const std::filesystem::path& work_dir, std::function<void()> wake) {
    m_wake = std::move(wake);
    auto server = ControlServer::start(work_dir, [this](const json& req) { return ask(req, k_answer_wait); });
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

json OwnerDesk::ask(json request, std::chrono::milliseconds wait) {
    auto reply = post(std::move(request), true);
    auto answer = reply->get_future();
    if (answer.wait_for(wait) == std::future_status::ready) {
        return answer.get();
    }
    {
        util::MutexLock lock(m_mu);
        auto mine =
            std::find_if(m_queue.begin(), m_queue.end(), [&](const PendingRequest& p) { return p.reply == reply; });
        if (mine != m_queue.end()) {
            // Not taken yet: withdrawn, so that "busy" is true (the agent will not do it later).
            m_queue.erase(mine);
            m_pending = !m_queue.empty();
            return json{{"ok", false},
                        {"error", "the worker is busy (its loop is waiting on the coordinator): nothing was "
                                  "changed; try again"}};
        }
    }
    return answer.get(); // the agent is answering it now
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

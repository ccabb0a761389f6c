// The owner's desk on its own (no socket): a request the agent answers in time, one it takes and
// answers late, and one it never takes in time, which must be withdrawn so that its "busy" is true:
// the soak (tests/soak) found pauses answered "busy" while the coordinator hung and done anyway.
#include "worker/owner/owner_desk.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_owner_desk {

using namespace gpupool;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// The agent's side: waits (at most 10 s) until a request is queued, then answers every queued one
// after `delay`.
std::thread agent(worker::OwnerDesk& desk, std::chrono::milliseconds delay, std::atomic<int>& answered) {
    return std::thread([&desk, delay, &answered] {
        const auto give_up = std::chrono::steady_clock::now() + 10s;
        while (!desk.pending()) {
            if (std::chrono::steady_clock::now() > give_up) {
                return;
            }
            std::this_thread::sleep_for(1ms);
        }
        answered += static_cast<int>(desk.answer_all([delay](const json& req) {
            std::this_thread::sleep_for(delay);
            return json{{"ok", true}, {"did", req.at("op")}};
        }));
    });
}

} // namespace

TEST_CASE("owner desk: a request the agent answers in time gets its answer", "[owner][desk]") {
    worker::OwnerDesk desk;
    std::atomic<int> answered{0};
    std::thread t = agent(desk, 0ms, answered);
    const json reply = desk.ask(json{{"op", "pause"}}, 5'000ms);
    t.join();
    CHECK(reply.at("ok") == true);
    CHECK(reply.at("did") == "pause");
    CHECK(answered == 1);
}

TEST_CASE("owner desk: a request the agent has taken is waited for past the wait", "[owner][desk]") {
    worker::OwnerDesk desk;
    std::atomic<int> answered{0};
    // Taken within a millisecond or so (1 s allowed, for a loaded machine), answered 1.5 s later:
    // past the 1 s the asker waits before it would withdraw a request not taken.
    std::thread t = agent(desk, 1'500ms, answered);
    const json reply = desk.ask(json{{"op", "resume"}}, 1'000ms);
    t.join();
    CHECK(reply.at("ok") == true);
    CHECK(reply.at("did") == "resume");
    CHECK(answered == 1);
}

TEST_CASE("owner desk: a request not taken in time is withdrawn, answered busy and never done later",
          "[owner][desk]") {
    worker::OwnerDesk desk;
    const json reply = desk.ask(json{{"op", "pause"}}, 30ms);
    CHECK(reply.at("ok") == false);
    CHECK_THAT(reply.at("error").get<std::string>(), Catch::Contains("busy") && Catch::Contains("nothing was changed"));
    // The agent, free again, finds nothing to do: the pause the owner was told failed never happens.
    CHECK_FALSE(desk.pending());
    int calls = 0;
    CHECK(desk.answer_all([&calls](const json&) {
        ++calls;
        return json{{"ok", true}};
    }) == 0);
    CHECK(calls == 0);
    // A request nobody waits for (SIGHUP's reload) is left alone by another's withdrawal.
    desk.post(json{{"op", "reload"}}, false);
    const json second = desk.ask(json{{"op", "pause"}}, 10ms);
    CHECK(second.at("ok") == false);
    CHECK(desk.pending());
    CHECK(desk.answer_all([&calls](const json& req) {
        ++calls;
        CHECK(req.at("op") == "reload");
        return json{{"ok", true}};
    }) == 1);
}

} // namespace test_owner_desk
} // namespace

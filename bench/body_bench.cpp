// A worker's heartbeats while members send the coordinator the largest bodies it takes: the latency
// of POST /v1/workers/heartbeat (one worker, one keep-alive connection, every --heartbeat-ms)
// against a real `gpupool coordinator` on loopback, while at once
//   --senders   connections each send, again and again, a sweep of 10,000 realistic jobs (the
//               tlens-attribution recipe over a 10 x 10 x 100 sweep, inputs archived) whose last job
//               is invalid: the server parses and reads the whole body, then answers 400;
//   --flooders  connections each send, again and again, --flood-mib of `{"jobs": [{}, {}, ...]}`;
//   --trickles  connections each declare --flood-mib, send 64 KiB at once and then a byte a second.
// bench/body_bench.sh starts the coordinator, makes the tokens, runs this and stops everything.
//
//   body_bench --url http://127.0.0.1:PORT --member-token M --enroll-token E [--duration 15s]
//              [--senders 3] [--flooders 1] [--trickles 8] [--flood-mib 15] [--heartbeat-ms 50]
//              [--coordinator-pid PID]
//
// Prints the size of the 10,000-job body, the heartbeats' count, median, p99 and max, what each
// kind of sender was answered (status -> count, median time), how the trickles ended, and the
// coordinator's peak resident memory (VmHWM, with --coordinator-pid). Exits 1 when a heartbeat
// failed, 2 on bad arguments.
#include "core/api/submit.hpp"
#include "core/net/http_client.hpp"
#include "core/recipe/parser.hpp"
#include "core/resources/quantity.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace gpupool;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// tlens-attribution (recipes/tlens-attribution) as a researcher would sweep it: 10 models x 10 layer
// blocks x 100 seeds, with an environment, outputs and a model cache.
constexpr const char* k_recipe = R"(format = 1
extends = "transformerlens"
name = "dla-{model}-layers-{layers}-seed{seed}"
command = ["python3", "/work/dla.py", "--model", "{model}", "--layers", "{layers}", "--seed", "{seed}",
           "--prompts", "/work/prompts.jsonl", "--out", "/outputs"]

[env]
HF_HUB_OFFLINE = "1"
TOKENIZERS_PARALLELISM = "false"
EXPERIMENT = "direct-logit-attribution"

[resources]
gpu_memory = "8GiB"
max_runtime = "45m"

[outputs]
paths = ["attribution.json", "plots"]

[cache]
models = ["openai-community/gpt2"]

[sweep]
model = ["gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl", "pythia-160m", "pythia-410m", "pythia-1b",
         "pythia-1.4b", "opt-125m", "opt-350m"]
layers = ["0-3", "4-7", "8-11", "12-15", "16-19", "20-23", "24-27", "28-31", "32-35", "36-39"]
seed = [)";

struct Options {
    std::string url;
    std::string member_token;
    std::string enroll_token;
    std::string duration = "15s";
    int senders = 3;
    int flooders = 1;
    int trickles = 8;
    std::size_t flood_mib = 15;
    int heartbeat_ms = 50;
    int coordinator_pid = 0;
};

std::string sweep_body() {
    std::string text = k_recipe;
    for (int seed = 1; seed <= 100; ++seed) {
        text += (seed > 1 ? ", " : "") + std::to_string(seed);
    }
    text += "]\n";
    recipe::ParseOptions po;
    po.allow_file_access = false;
    auto parsed = recipe::parse_recipe_text(text, "bench.toml", po);
    if (!parsed) {
        throw std::runtime_error("the bench's recipe: " + parsed.error().message);
    }
    auto jobs = recipe::expand(*parsed, po);
    if (!jobs) {
        throw std::runtime_error("the bench's sweep: " + jobs.error().message);
    }
    api::SubmitRequest request;
    request.source = "recipes/tlens-attribution/recipe.toml";
    request.jobs = std::move(*jobs);
    for (auto& job : request.jobs) {
        job.inputs.archive = std::string(64, 'a'); // uploaded first, as `gpupool submit` does
    }
    json body = api::to_json(request);
    body["jobs"].back()["image"] = 5; // refused at the very end: the whole body is parsed and read first
    return body.dump();
}

std::string flood_body(std::size_t bytes) {
    std::string body = "{\"source\": \"flood\", \"jobs\": [{}";
    body.reserve(bytes + 8);
    while (body.size() + 3 < bytes) {
        body += ",{}";
    }
    return body + "]}";
}

double ms(Clock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) {
        return 0;
    }
    std::sort(v.begin(), v.end());
    const auto at = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(at, v.size() - 1)];
}

net::HttpClient client(const Options& o, const std::string& token) {
    net::ClientOptions co;
    co.base_url = o.url;
    co.token = token;
    co.timeout = std::chrono::milliseconds(120'000);
    return net::HttpClient(co);
}

// What one kind of sender was answered: status -> count, and the times of the answers.
struct Tally {
    std::mutex mutex;
    std::map<int, int> statuses; // 0: no answer
    std::vector<double> times_ms;

    void add(int status, double t) {
        std::lock_guard lock(mutex);
        ++statuses[status];
        times_ms.push_back(t);
    }
    void print(const std::string& what) {
        std::lock_guard lock(mutex);
        std::cout << what << ":";
        for (const auto& [status, n] : statuses) {
            std::cout << " " << (status == 0 ? std::string("none") : std::to_string(status)) << " x" << n;
        }
        std::printf(", median %.0f ms, max %.0f ms\n", percentile(times_ms, 0.5),
                    times_ms.empty() ? 0.0 : *std::max_element(times_ms.begin(), times_ms.end()));
    }
};

void send_loop(const Options& o, const std::string& body, const std::atomic<bool>& stop, Tally& tally) {
    auto c = client(o, o.member_token);
    while (!stop) {
        const auto t0 = Clock::now();
        auto r = c.request("POST", "/v1/jobs", body);
        tally.add(r ? r->status : 0, ms(Clock::now() - t0));
        if (r && r->status == 503) {
            std::this_thread::sleep_for(std::chrono::milliseconds(500)); // as Retry-After asks, sooner
        }
    }
}

int connect_to(const std::string& url) {
    const auto colon = url.rfind(':');
    const int port = std::stoi(url.substr(colon + 1));
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        if (fd >= 0) {
            ::close(fd);
        }
        return -1;
    }
    return fd;
}

bool send_all(int fd, const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
        const auto n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) {
            return false;
        }
        sent += static_cast<std::size_t>(n);
    }
    return true;
}

// One trickle: how it ended ("cut" by the server, "answered" (a 503 or 413 before its body), or
// "open" at the end of the run).
std::string trickle(const Options& o, const std::atomic<bool>& stop) {
    const int fd = connect_to(o.url);
    if (fd < 0) {
        return "refused";
    }
    const std::string head = "POST /v1/jobs HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer " + o.member_token +
                             "\r\nContent-Length: " + std::to_string(o.flood_mib << 20) + "\r\n\r\n";
    std::string how = "open";
    if (!send_all(fd, head + "{\"jobs\": [" + std::string(64 * 1024, ' '))) {
        how = "cut";
    }
    while (how == "open" && !stop) {
        char buf[512];
        const auto n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            how = "answered";
        } else if (n == 0) {
            how = "cut";
        } else if (!send_all(fd, " ")) {
            how = "cut";
        }
        for (int i = 0; i < 10 && !stop; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }
    ::close(fd);
    return how;
}

std::int64_t peak_rss_kib(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("VmHWM:", 0) == 0) {
            return std::stoll(line.substr(6));
        }
    }
    return 0;
}

int run(const Options& o) {
    const std::string sweep = sweep_body();
    const std::string flood = flood_body(o.flood_mib << 20);
    std::printf("bodies: a sweep of 10,000 jobs is %.1f MiB (%zu bytes a job); the flood is %zu MiB\n",
                static_cast<double>(sweep.size()) / (1 << 20), sweep.size() / 10'000, o.flood_mib);

    auto enroll = client(o, o.enroll_token);
    const json inventory = {{"cpu_milli", 16000}, {"memory_mib", 65536}, {"gpus", json::array()}};
    auto reg =
        enroll.request("POST", "/v1/workers/register", json{{"name", "body-bench"}, {"inventory", inventory}}.dump());
    if (!reg || reg->status != 201) {
        std::cerr << "could not register the worker: " << (reg ? reg->body : reg.error().message) << "\n";
        return 1;
    }
    const std::string worker_token = json::parse(reg->body)["token"];
    const auto duration = std::chrono::seconds(resources::parse_duration_s(o.duration).value());

    std::atomic<bool> stop{false};
    Tally sweeps;
    Tally floods;
    std::mutex trickle_mutex;
    std::map<std::string, int> trickle_ends;
    std::vector<std::thread> threads;
    for (int i = 0; i < o.trickles; ++i) {
        threads.emplace_back([&] {
            auto how = trickle(o, stop);
            std::lock_guard lock(trickle_mutex);
            ++trickle_ends[how];
        });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500)); // the trickles hold their shares first
    for (int i = 0; i < o.senders; ++i) {
        threads.emplace_back([&] { send_loop(o, sweep, stop, sweeps); });
    }
    for (int i = 0; i < o.flooders; ++i) {
        threads.emplace_back([&] { send_loop(o, flood, stop, floods); });
    }

    auto w = client(o, worker_token);
    std::vector<double> beats;
    int failed = 0;
    const std::string beat = json{{"running", json::array()}}.dump();
    const auto end = Clock::now() + duration;
    auto next = Clock::now();
    while (Clock::now() < end) {
        const auto t0 = Clock::now();
        auto r = w.request("POST", "/v1/workers/heartbeat", beat);
        const double t = ms(Clock::now() - t0);
        if (!r || r->status != 200) {
            ++failed;
        } else {
            beats.push_back(t);
        }
        next += std::chrono::milliseconds(o.heartbeat_ms);
        std::this_thread::sleep_until(std::max(next, Clock::now()));
    }
    stop = true;
    const std::int64_t hwm = o.coordinator_pid != 0 ? peak_rss_kib(o.coordinator_pid) : 0;
    for (auto& t : threads) {
        t.join();
    }

    std::printf("heartbeats: %zu answered, %d failed; median %.1f ms, p99 %.1f ms, max %.1f ms\n", beats.size(), failed,
                percentile(beats, 0.5), percentile(beats, 0.99),
                beats.empty() ? 0.0 : *std::max_element(beats.begin(), beats.end()));
    sweeps.print("10,000-job sweeps (" + std::to_string(o.senders) + " connections)");
    floods.print(std::to_string(o.flood_mib) + " MiB floods (" + std::to_string(o.flooders) + " connections)");
    std::cout << "trickles (" << o.trickles << "):";
    for (const auto& [how, n] : trickle_ends) {
        std::cout << " " << how << " x" << n;
    }
    std::cout << "\n";
    if (hwm != 0) {
        std::printf("coordinator peak RSS (VmHWM): %.0f MiB\n", static_cast<double>(hwm) / 1024);
    }
    return failed == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"A worker's heartbeat latency while members send the coordinator maximal bodies"};
    app.add_option("--url", o.url, "The coordinator, http://127.0.0.1:PORT")->required();
    app.add_option("--member-token", o.member_token, "A member token of a funded team")->required();
    app.add_option("--enroll-token", o.enroll_token, "An enrollment token (one registration)")->required();
    app.add_option("--duration", o.duration, "How long the heartbeats are measured")->capture_default_str();
    app.add_option("--senders", o.senders, "Connections sending 10,000-job sweeps")->capture_default_str();
    app.add_option("--flooders", o.flooders, "Connections sending --flood-mib of {} jobs")->capture_default_str();
    app.add_option("--trickles", o.trickles, "Connections trickling a --flood-mib body")->capture_default_str();
    app.add_option("--flood-mib", o.flood_mib, "Size of the floods and of what the trickles declare")
        ->capture_default_str();
    app.add_option("--heartbeat-ms", o.heartbeat_ms, "Period of the heartbeats")->capture_default_str();
    app.add_option("--coordinator-pid", o.coordinator_pid, "For the coordinator's peak memory (/proc)");
    CLI11_PARSE(app, argc, argv);
    try {
        return run(o);
    } catch (const std::exception& e) {
        std::cerr << "body_bench: " << e.what() << "\n";
        return 2;
    }
}

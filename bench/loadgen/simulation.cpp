#include "bench/loadgen/simulation.hpp"

#include "core/api/assignment.hpp"
#include "core/api/heartbeat.hpp"
#include "core/api/jobs.hpp"
#include "core/api/submit.hpp"
#include "core/api/worker_protocol.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>

namespace gpupool::loadgen {

namespace {

using json = nlohmann::json;

constexpr std::size_t k_recent_jobs = 2000; // jobs kept to read the status and logs of
constexpr auto k_retry = std::chrono::seconds(1);
const std::string k_poll_empty = "POST /v1/workers/poll, empty: past its wait";
const std::string k_poll_work = "POST /v1/workers/poll, with work: wait included";
const std::string k_dispatch = "submit sent -> assignment received";

json parse(const std::string& body) {
    return json::parse(body, nullptr, false);
}

api::Inventory inventory(std::int64_t slots) {
    api::Inventory inv;
    inv.cpu_milli = slots * 1000;
    inv.memory_mib = slots * 1024;
    inv.slots = slots;
    inv.runtime = "loadgen";
    return inv;
}

recipe::JobSpec job_spec(std::int64_t sweep, std::int64_t index) {
    recipe::JobSpec s;
    s.name = "lg-" + std::to_string(sweep) + "-" + std::to_string(index);
    s.image = "busybox";
    s.command = {"true"};
    s.resources.cpu_milli = 1000;
    s.resources.memory_mib = 512;
    s.resources.max_runtime_s = 600;
    s.params = {{"i", std::to_string(index)}};
    s.sweep_index = index;
    return s;
}

void remember(std::deque<std::int64_t>& q, std::int64_t id) {
    q.push_back(id);
    if (q.size() > k_recent_jobs) {
        q.pop_front();
    }
}

} // namespace

DriverOptions driver_options(const SimOptions& o, const std::string& base_url) {
    DriverOptions d;
    d.base_url = base_url;
    d.shards = (o.workers + o.workers_per_shard - 1) / o.workers_per_shard + 1;
    d.connections_per_shard = static_cast<long>(o.workers_per_shard) + o.spare_connections;
    return d;
}

Simulation::Simulation(HttpDriver& driver, SimOptions options)
    : m_driver(driver), m_options(std::move(options)), m_rng(m_options.seed) {
    m_workers.resize(m_options.workers);
    for (std::size_t i = 0; i < m_workers.size(); ++i) {
        m_workers[i].index = i;
    }
}

std::size_t Simulation::researcher_shard() const {
    return (m_options.workers + m_options.workers_per_shard - 1) / m_options.workers_per_shard;
}

double Simulation::uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(m_rng);
}

void Simulation::every(double rate, std::function<void()> f) {
    if (rate <= 0) {
        return;
    }
    const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / rate));
    auto tick = std::make_shared<std::function<void(Clock::time_point)>>();
    *tick = [this, period, f = std::move(f), weak = std::weak_ptr(tick)](Clock::time_point due) {
        if (!m_running) {
            return;
        }
        f();
        if (auto self = weak.lock()) {
            m_driver.at(due + period, [self, next = due + period] { (*self)(next); });
        }
    };
    const auto first = Clock::now() + std::chrono::duration_cast<Clock::duration>(period * uniform(0, 1));
    m_driver.at(first, [tick, first] { (*tick)(first); });
}

void Simulation::send(std::size_t shard, HttpRequest request, const std::string& route, long expect,
                      std::function<void(HttpResult&)> then) {
    m_driver.send(shard, std::move(request), [this, route, expect, then = std::move(then)](HttpResult&& r) {
        m_stats->request(route, r, r.status == expect);
        then(r);
    });
}

bool Simulation::ramp_up(Stats& stats, std::chrono::seconds limit) {
    m_stats = &stats;
    m_running = true;
    const auto start = Clock::now();
    for (std::size_t i = 0; i < m_workers.size(); ++i) {
        const auto when = start + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(static_cast<double>(i) / m_options.register_rate));
        m_driver.at(when, [this, i] { register_worker(i); });
    }
    m_driver.run(start + limit, [this] { return m_register_answers == m_workers.size(); });
    return m_registered == m_workers.size();
}

void Simulation::register_worker(std::size_t index) {
    Worker& w = m_workers[index];
    api::Registration reg;
    reg.name = "loadgen-" + std::to_string(index);
    reg.inventory = inventory(m_options.slots);
    reg.terms = m_options.terms;
    HttpRequest req{"POST", "/v1/workers/register",
                    m_options.enroll_tokens[(index / 10'000) % m_options.enroll_tokens.size()],
                    api::to_json(reg).dump()};
    send(shard_of(w), std::move(req), "POST /v1/workers/register", 201, [this, &w](HttpResult& r) {
        ++m_register_answers;
        if (r.status != 201) {
            return;
        }
        auto reply = api::registration_reply_from_json(parse(r.body));
        if (!reply) {
            m_stats->count("unreadable registration answers");
            return;
        }
        ++m_registered;
        w.token = reply->token;
        heartbeat(w);
        poll(w);
    });
}

void Simulation::heartbeat(Worker& w) {
    if (!m_running) {
        return;
    }
    const double jitter = w.inventory_sent ? uniform(0.9, 1.1) : uniform(0.0, 1.0); // spread the first round
    const auto next = Clock::now() + std::chrono::duration_cast<Clock::duration>(m_options.heartbeat_every * jitter);
    m_driver.at(next, [this, &w] { heartbeat(w); });
    api::Heartbeat beat;
    for (std::int64_t id : w.held) {
        beat.running.emplace_back(id);
    }
    if (!w.inventory_sent) {
        beat.inventory = inventory(m_options.slots);
        w.inventory_sent = true;
    }
    beat.terms = m_options.terms; // every time: a heartbeat without terms clears them
    HttpRequest req{"POST", "/v1/workers/heartbeat", w.token, api::to_json(beat).dump()};
    send(shard_of(w), std::move(req), "POST /v1/workers/heartbeat", 200, [this, &w](HttpResult& r) {
        if (r.status != 200) {
            return;
        }
        auto reply = api::heartbeat_reply_from_json(parse(r.body));
        if (!reply || reply->stop.empty()) {
            return;
        }
        m_stats->count("attempts stopped by a heartbeat", static_cast<std::int64_t>(reply->stop.size()));
        for (AttemptId id : reply->stop) {
            std::erase(w.held, id.value());
        }
    });
}

void Simulation::poll(Worker& w) {
    if (!m_running) {
        return;
    }
    const auto wait = m_options.poll_wait;
    HttpRequest req{"POST", "/v1/workers/poll?wait_ms=" + std::to_string(wait.count()), w.token, "{}",
                    wait + std::chrono::seconds(15)};
    w.poll = m_driver.send(shard_of(w), std::move(req), [this, &w](HttpResult&& r) {
        w.poll = 0;
        on_poll(w, r);
    });
}

void Simulation::on_poll(Worker& w, HttpResult& r) {
    const json body = r.status == 200 ? parse(r.body) : json();
    const bool ok = body.is_object() && body.contains("assignments") && body["assignments"].is_array();
    if (!ok) {
        m_stats->request("POST /v1/workers/poll", r, false);
        m_driver.at(Clock::now() + k_retry, [this, &w] { poll(w); });
        return;
    }
    const json& list = body["assignments"];
    if (list.empty()) {
        // Answered at the end of its wait: how late that answer came is the server's part.
        r.elapsed = std::max(Clock::duration{}, r.elapsed - m_options.poll_wait);
        r.server = std::max(Clock::duration{}, r.server - m_options.poll_wait);
        m_stats->request(k_poll_empty, r, true);
        poll(w);
        return;
    }
    m_stats->request(k_poll_work, r, true);
    const auto now = Clock::now();
    for (const json& item : list) {
        auto a = api::assignment_from_json(item);
        if (!a) {
            m_stats->count("unreadable assignments");
            continue;
        }
        const std::int64_t attempt = a->attempt.value();
        if (std::find(w.held.begin(), w.held.end(), attempt) != w.held.end()) {
            m_stats->count("assignments seen again before their start was taken");
            continue; // assigned before and not started yet: it comes again until it is
        }
        w.held.push_back(attempt);
        m_stats->count("jobs dispatched");
        if (auto it = m_submitted_at.find(a->job.value()); it != m_submitted_at.end()) {
            m_stats->sample(k_dispatch, now - it->second);
            m_submitted_at.erase(it);
        }
        start_attempt(w, attempt, a->job.value());
    }
    poll(w);
}

void Simulation::start_attempt(Worker& w, std::int64_t attempt, std::int64_t job) {
    const std::string base = "/v1/attempts/" + std::to_string(attempt);
    send(shard_of(w), HttpRequest{"POST", base + "/start", w.token, ""}, "POST /v1/attempts/{id}/start", 200,
         [this, &w, base, attempt, job](HttpResult& r) {
             if (r.status != 200) {
                 std::erase(w.held, attempt);
                 return;
             }
             // As a worker does: the log is delivered before the completion is sent.
             const auto started = Clock::now();
             HttpRequest log{"POST", base + "/logs?offset=0", w.token, "loadgen: ran `true`, exit 0\n"};
             send(shard_of(w), std::move(log), "POST /v1/attempts/{id}/logs", 200,
                  [this, &w, attempt, job, started](HttpResult&) {
                      const auto run =
                          std::chrono::duration_cast<Clock::duration>(m_options.run_time * uniform(0.5, 1.5));
                      m_driver.at(started + run, [this, &w, attempt, job] { complete_attempt(w, attempt, job); });
                  });
         });
}

void Simulation::complete_attempt(Worker& w, std::int64_t attempt, std::int64_t job) {
    if (!m_running || std::find(w.held.begin(), w.held.end(), attempt) == w.held.end()) {
        return; // the run is over, or a heartbeat said to stop it
    }
    api::Completion done;
    done.exit_code = 0;
    HttpRequest req{"POST", "/v1/attempts/" + std::to_string(attempt) + "/complete", w.token,
                    api::to_json(done).dump()};
    send(shard_of(w), std::move(req), "POST /v1/attempts/{id}/complete", 200, [this, &w, attempt, job](HttpResult& r) {
        std::erase(w.held, attempt);
        if (r.status == 200) {
            m_stats->count("jobs completed");
            remember(m_finished_jobs, job);
        }
    });
}

void Simulation::run(Stats& stats, std::chrono::seconds duration) {
    m_stats = &stats;
    every(m_options.submit_rate, [this] { submit(); });
    every(m_options.list_rate, [this] { list_jobs(); });
    every(m_options.status_rate, [this] { job_status(); });
    every(m_options.log_rate, [this] { read_log(); });
    m_driver.run(Clock::now() + duration, [] { return false; });
}

void Simulation::wind_down(Stats& stats, std::chrono::seconds limit) {
    m_stats = &stats;
    m_running = false;
    for (Worker& w : m_workers) {
        if (w.poll != 0) {
            m_driver.cancel(w.poll);
            w.poll = 0;
        }
    }
    m_driver.run(Clock::now() + limit, [this] { return m_driver.in_flight() == 0; });
}

void Simulation::submit() {
    api::SubmitRequest s;
    s.source = "loadgen";
    const std::int64_t sweep = ++m_sweeps;
    for (std::int64_t i = 0; i < m_options.jobs_per_sweep; ++i) {
        s.jobs.push_back(job_spec(sweep, i));
    }
    const auto sent = Clock::now();
    HttpRequest req{"POST", "/v1/jobs", m_options.member_token, api::to_json(s).dump()};
    send(researcher_shard(), std::move(req), "POST /v1/jobs", 201, [this, sent](HttpResult& r) {
        if (r.status != 201) {
            return;
        }
        auto reply = api::submit_reply_from_json(parse(r.body));
        if (!reply) {
            m_stats->count("unreadable submit answers");
            return;
        }
        m_stats->count("jobs submitted", static_cast<std::int64_t>(reply->jobs.size()));
        for (JobId id : reply->jobs) {
            m_submitted_at.emplace(id.value(), sent);
            remember(m_recent_jobs, id.value());
        }
    });
}

void Simulation::list_jobs() {
    send(researcher_shard(), HttpRequest{"GET", "/v1/jobs?limit=50", m_options.member_token, ""},
         "GET /v1/jobs?limit=50", 200, [](HttpResult&) {});
}

void Simulation::job_status() {
    if (m_recent_jobs.empty()) {
        return;
    }
    const std::int64_t id =
        m_recent_jobs[static_cast<std::size_t>(uniform(0, 1) * static_cast<double>(m_recent_jobs.size())) %
                      m_recent_jobs.size()];
    send(researcher_shard(), HttpRequest{"GET", "/v1/jobs/" + std::to_string(id), m_options.member_token, ""},
         "GET /v1/jobs/{id}", 200, [](HttpResult&) {});
}

void Simulation::read_log() {
    if (m_finished_jobs.empty()) {
        return;
    }
    const std::int64_t id =
        m_finished_jobs[static_cast<std::size_t>(uniform(0, 1) * static_cast<double>(m_finished_jobs.size())) %
                        m_finished_jobs.size()];
    send(researcher_shard(), HttpRequest{"GET", "/v1/jobs/" + std::to_string(id) + "/logs", m_options.member_token, ""},
         "GET /v1/jobs/{id}/logs", 200, [](HttpResult&) {});
}

} // namespace gpupool::loadgen

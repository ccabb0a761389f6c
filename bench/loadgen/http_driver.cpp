#include "bench/loadgen/http_driver.hpp"

#include "core/net/url.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <queue>
#include <stdexcept>
#include <sys/epoll.h>
#include <unistd.h>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpupool::loadgen {

namespace {

constexpr int k_max_events = 1024;
constexpr auto k_longest_wait = std::chrono::milliseconds(200); // the loop turns at least this often

struct Timer {
    Clock::time_point when;
    std::uint64_t seq = 0;
    std::function<void()> f;
};

struct Later {
    bool operator()(const Timer& a, const Timer& b) const { return a.when != b.when ? a.when > b.when : a.seq > b.seq; }
};

std::size_t write_body(char* data, std::size_t size, std::size_t n, void* userp) {
    static_cast<std::string*>(userp)->append(data, size * n);
    return size * n;
}

} // namespace

struct HttpDriver::Impl {
    struct Shard {
        Impl* owner = nullptr;
        std::uint32_t index = 0;
        CURLM* multi = nullptr;
        std::optional<Clock::time_point> deadline; // curl's timer
    };

    struct Transfer {
        std::uint64_t id = 0;
        std::size_t shard = 0;
        CURL* easy = nullptr;
        curl_slist* headers = nullptr;
        HttpRequest request;
        std::size_t base = 0; // which of `bases`
        std::string url;
        std::string response;
        Done done;
        Clock::time_point started;
    };

    DriverOptions options;
    std::vector<std::string> bases; // options.base_url split at commas
    std::size_t current = 0;        // the one requests go to
    int epfd = -1;
    std::vector<std::unique_ptr<Shard>> shards;
    std::unordered_map<std::uint64_t, std::unique_ptr<Transfer>> transfers;
    std::vector<CURL*> spare;
    std::priority_queue<Timer, std::vector<Timer>, Later> timers;
    std::uint64_t next_id = 1;
    std::uint64_t next_timer = 1;
    Clock::duration max_lag{};

    explicit Impl(DriverOptions o) : options(std::move(o)), bases(net::split_url_list(options.base_url)) {
        if (bases.empty()) {
            throw std::runtime_error("no coordinator URL in `" + options.base_url + "`");
        }
        epfd = epoll_create1(EPOLL_CLOEXEC);
        if (epfd < 0) {
            throw std::runtime_error(std::string("epoll_create1: ") + std::strerror(errno));
        }
        for (std::size_t i = 0; i < std::max<std::size_t>(1, options.shards); ++i) {
            auto s = std::make_unique<Shard>();
            s->owner = this;
            s->index = static_cast<std::uint32_t>(i);
            s->multi = curl_multi_init();
            curl_multi_setopt(s->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, options.connections_per_shard);
            curl_multi_setopt(s->multi, CURLMOPT_MAXCONNECTS, options.connections_per_shard);
            curl_multi_setopt(s->multi, CURLMOPT_SOCKETFUNCTION, &Impl::on_socket);
            curl_multi_setopt(s->multi, CURLMOPT_SOCKETDATA, s.get());
            curl_multi_setopt(s->multi, CURLMOPT_TIMERFUNCTION, &Impl::on_timer);
            curl_multi_setopt(s->multi, CURLMOPT_TIMERDATA, s.get());
            shards.push_back(std::move(s));
        }
    }

    ~Impl() {
        for (auto& [id, t] : transfers) {
            curl_multi_remove_handle(shards[t->shard]->multi, t->easy);
            curl_easy_cleanup(t->easy);
            curl_slist_free_all(t->headers);
        }
        for (CURL* e : spare) {
            curl_easy_cleanup(e);
        }
        for (auto& s : shards) {
            curl_multi_cleanup(s->multi);
        }
        close(epfd);
    }

    // curl says which events it wants on a socket; the epoll entry carries the shard and the fd.
    static int on_socket(CURL*, curl_socket_t fd, int what, void* userp, void*) {
        auto* shard = static_cast<Shard*>(userp);
        const int epfd = shard->owner->epfd;
        if (what == CURL_POLL_REMOVE) {
            epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nullptr); // it may be closed already: nothing to do then
            return 0;
        }
        epoll_event ev{};
        ev.events = ((what & CURL_POLL_IN) != 0 ? EPOLLIN : 0U) | ((what & CURL_POLL_OUT) != 0 ? EPOLLOUT : 0U);
        ev.data.u64 = (std::uint64_t{shard->index} << 32) | static_cast<std::uint32_t>(fd);
        if (epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) != 0 && errno == ENOENT) {
            epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
        }
        return 0;
    }

    static int on_timer(CURLM*, long timeout_ms, void* userp) {
        auto* shard = static_cast<Shard*>(userp);
        if (timeout_ms < 0) {
            shard->deadline.reset();
        } else {
            shard->deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
        }
        return 0;
    }

    CURL* take_easy() {
        if (spare.empty()) {
            return curl_easy_init();
        }
        CURL* e = spare.back();
        spare.pop_back();
        curl_easy_reset(e);
        return e;
    }

    void configure(Transfer& t) {
        CURL* e = t.easy;
        const HttpRequest& r = t.request;
        t.base = current;
        t.url = bases[current] + r.target;
        curl_easy_setopt(e, CURLOPT_URL, t.url.c_str());
        curl_easy_setopt(e, CURLOPT_PRIVATE, &t);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(r.timeout.count()));
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout.count()));
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &write_body);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &t.response);
        if (!r.token.empty()) {
            t.headers = curl_slist_append(t.headers, ("Authorization: Bearer " + r.token).c_str());
        }
        t.headers = curl_slist_append(t.headers, "Expect:");
        if (r.method == "GET") {
            curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
        } else {
            t.headers = curl_slist_append(t.headers, "Content-Type: application/json");
            curl_easy_setopt(e, CURLOPT_POST, 1L);
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, r.body.data());
            if (r.method != "POST") {
                curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r.method.c_str());
            }
        }
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, t.headers);
    }

    std::uint64_t send(std::size_t shard, HttpRequest request, Done done) {
        auto t = std::make_unique<Transfer>();
        t->id = next_id++;
        t->shard = shard % shards.size();
        t->easy = take_easy();
        t->request = std::move(request);
        t->done = std::move(done);
        t->started = Clock::now();
        configure(*t);
        const std::uint64_t id = t->id;
        CURLMcode rc = curl_multi_add_handle(shards[t->shard]->multi, t->easy);
        if (rc != CURLM_OK) {
            // Answer as a failed transfer, from the loop, never from inside send().
            auto failed = std::make_shared<HttpResult>();
            failed->curl = CURLE_FAILED_INIT;
            auto cb = std::make_shared<Done>(std::move(t->done));
            spare.push_back(t->easy);
            curl_slist_free_all(t->headers);
            at(Clock::now(), [failed, cb] { (*cb)(std::move(*failed)); });
            return id;
        }
        transfers.emplace(id, std::move(t));
        return id;
    }

    // Moves a finished (or cancelled) transfer out of curl and the table; its easy handle is kept.
    std::unique_ptr<Transfer> detach(std::uint64_t id) {
        auto it = transfers.find(id);
        if (it == transfers.end()) {
            return nullptr;
        }
        std::unique_ptr<Transfer> t = std::move(it->second);
        transfers.erase(it);
        curl_multi_remove_handle(shards[t->shard]->multi, t->easy);
        curl_slist_free_all(t->headers);
        t->headers = nullptr;
        spare.push_back(t->easy);
        return t;
    }

    void collect(Shard& shard) {
        int left = 0;
        while (CURLMsg* msg = curl_multi_info_read(shard.multi, &left)) {
            if (msg->msg != CURLMSG_DONE) {
                continue;
            }
            Transfer* raw = nullptr;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &raw);
            HttpResult r;
            r.curl = msg->data.result;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &r.status);
            curl_off_t pre = 0;
            curl_off_t first = 0;
            long connects = 0;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRETRANSFER_TIME_T, &pre);
            curl_easy_getinfo(msg->easy_handle, CURLINFO_STARTTRANSFER_TIME_T, &first);
            curl_easy_getinfo(msg->easy_handle, CURLINFO_NUM_CONNECTS, &connects);
            r.server = std::chrono::microseconds(std::max<curl_off_t>(0, first - pre));
            r.reused_connection = connects == 0;
            auto t = detach(raw->id);
            const bool gone = r.curl == CURLE_COULDNT_CONNECT || r.curl == CURLE_OPERATION_TIMEDOUT;
            if ((r.status == 503 || gone) && t->base == current) {
                current = (current + 1) % bases.size(); // a standby, nobody there, or stalled: the next one
            }
            r.elapsed = Clock::now() - t->started;
            r.body = std::move(t->response);
            t->done(std::move(r));
        }
    }

    void act(Shard& shard, curl_socket_t fd, int flags) {
        int running = 0;
        curl_multi_socket_action(shard.multi, fd, flags, &running);
        collect(shard);
    }

    void run_due_timers() {
        const auto now = Clock::now();
        while (!timers.empty() && timers.top().when <= now) {
            Timer t = timers.top();
            timers.pop();
            max_lag = std::max(max_lag, now - t.when);
            t.f();
        }
        for (auto& s : shards) {
            if (s->deadline && *s->deadline <= Clock::now()) {
                s->deadline.reset();
                act(*s, CURL_SOCKET_TIMEOUT, 0);
            }
        }
    }

    int wait_ms(Clock::time_point deadline) const {
        Clock::time_point next = std::min(deadline, Clock::now() + k_longest_wait);
        if (!timers.empty()) {
            next = std::min(next, timers.top().when);
        }
        for (const auto& s : shards) {
            if (s->deadline) {
                next = std::min(next, *s->deadline);
            }
        }
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now());
        return static_cast<int>(std::max<std::int64_t>(0, left.count()));
    }

    void run(Clock::time_point deadline, const std::function<bool()>& stop) {
        std::array<epoll_event, k_max_events> events{};
        while (!stop() && Clock::now() < deadline) {
            run_due_timers();
            const int n = epoll_wait(epfd, events.data(), k_max_events, wait_ms(deadline));
            for (int i = 0; i < n; ++i) {
                const std::uint64_t data = events[static_cast<std::size_t>(i)].data.u64;
                const std::uint32_t ev = events[static_cast<std::size_t>(i)].events;
                const int flags = ((ev & EPOLLIN) != 0 ? CURL_CSELECT_IN : 0) |
                                  ((ev & EPOLLOUT) != 0 ? CURL_CSELECT_OUT : 0) |
                                  ((ev & (EPOLLERR | EPOLLHUP)) != 0 ? CURL_CSELECT_ERR : 0);
                act(*shards[data >> 32], static_cast<curl_socket_t>(data & 0xffffffffU), flags);
            }
        }
    }

    // A time already past counts from now: lateness measures the loop, not the caller's schedule.
    void at(Clock::time_point when, std::function<void()> f) {
        timers.push(Timer{std::max(when, Clock::now()), next_timer++, std::move(f)});
    }
};

HttpDriver::HttpDriver(DriverOptions options) : m_impl(std::make_unique<Impl>(std::move(options))) {}

HttpDriver::~HttpDriver() = default;

std::uint64_t HttpDriver::send(std::size_t shard, HttpRequest request, Done done) {
    return m_impl->send(shard, std::move(request), std::move(done));
}

void HttpDriver::cancel(std::uint64_t id) {
    m_impl->detach(id);
}

void HttpDriver::at(Clock::time_point when, std::function<void()> f) {
    m_impl->at(when, std::move(f));
}

void HttpDriver::run(Clock::time_point deadline, const std::function<bool()>& stop) {
    m_impl->run(deadline, stop);
}

std::size_t HttpDriver::in_flight() const {
    return m_impl->transfers.size();
}

Clock::duration HttpDriver::take_max_timer_lag() {
    return std::exchange(m_impl->max_lag, Clock::duration{});
}

} // namespace gpupool::loadgen

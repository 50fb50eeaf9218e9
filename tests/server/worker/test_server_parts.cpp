// The daemon's parts on their own: stop-string matching, the bounded job queue and channel,
// config precedence and refusal, metrics exposition, and the worker against a FakeEngine
// without HTTP (events, cancellation, reuse).
#include <doctest/doctest.h>

#include "common/scratch.h"

#include <cstdlib>
#include <fstream>
#include <optional>
#include <thread>
#include <vector>
#include <nlohmann/json.hpp>

#include "daemon_args.h"
#include "settings/daemon_config.h"
#include "fake_engine.h"
#include "wire/json_body.h"
#include "k3/error.h"
#include "ops/metrics.h"
#include "worker/prompt_lookup.h"
#include "worker/stop_matcher.h"
#include "worker/worker.h"

using namespace k3;
using namespace k3::server;
using k3::test::parse_daemon_args;
using namespace k3::test;

TEST_CASE("StopMatcher holds back possible starts and cuts at the earliest stop") {
    StopMatcher m({"END", "xy"});
    CHECK(m.push("abc") == "abc");
    CHECK(m.push("E") == "");       // could be END
    CHECK(m.push("N") == "");
    CHECK(m.push("X") == "ENX");    // was not
    CHECK(m.push("x") == "");
    CHECK(m.push("y and more") == "");
    CHECK(m.stopped());
    CHECK(m.push("later") == "");
    CHECK(m.flush() == "");

    StopMatcher n({"ab"});
    CHECK(n.push("xxa") == "xx");
    CHECK(n.flush() == "a");  // the end of generation releases what was held
    CHECK_FALSE(n.stopped());

    StopMatcher both({"bc", "abcd"});
    CHECK(both.push("zabc") == "za");  // "bc" completes first
    CHECK(both.stopped());

    StopMatcher none({});
    CHECK(none.push("anything") == "anything");
}

TEST_CASE("JSON pre-scan: values and depth outside strings, stopping early") {
    CHECK(scan_json_shape("[1,2,3]", 64, 100).values == 4);
    // An upper bound of the nodes: a nested container is also counted as its parent's element.
    CHECK(scan_json_shape(R"({"a":1,"b":[true,null]})", 64, 100).values == 6);
    CHECK(scan_json_shape("  7 ", 64, 100).values == 1);
    CHECK(scan_json_shape("", 64, 100).values == 0);
    JsonShape s = scan_json_shape(R"(["[{,,,\"]]]", [[0]]])", 64, 100);
    CHECK(s.depth == 3);
    CHECK(s.values == 7);
    CHECK(scan_json_shape(std::string(1000, '['), 64, 1u << 20).depth == 65);  // stops past the limit
    CHECK(scan_json_shape("[" + std::string(1000, ','), 64, 10).values == 11);
    CHECK(json_value_budget(256) == 256 + 65536);
    CHECK_THROWS_AS(parse_json_body("[1,2,3]", {64, 3}), ApiError);
    CHECK(parse_json_body("[1,2,3]", {64, 4}).value.size() == 3);
}

TEST_CASE("JobQueue is bounded and refuses after close") {
    JobQueue q(2);
    CHECK(q.push(std::make_shared<Job>()) == JobQueue::PushResult::Ok);
    CHECK(q.push(std::make_shared<Job>()) == JobQueue::PushResult::Ok);
    CHECK(q.push(std::make_shared<Job>()) == JobQueue::PushResult::Full);
    CHECK(q.size() == 2);
    auto first = q.pop(std::chrono::milliseconds(1));
    REQUIRE(first.has_value());
    CHECK(*first != nullptr);
    q.close();
    CHECK(q.push(std::make_shared<Job>()) == JobQueue::PushResult::Closed);
    CHECK(q.pop(std::chrono::milliseconds(1)).has_value());  // still drains
    CHECK_FALSE(q.pop(std::chrono::milliseconds(1)).has_value());
}

TEST_CASE("JobChannel: never waits; past its byte budget a push is refused, the job's end is always taken") {
    JobChannel ch;
    JobEvent text;
    text.content = std::string(1000, 'x');
    const size_t one = event_bytes(text);
    CHECK(one > 1000);
    const size_t budget = 3 * one;
    CHECK(ch.push(text, budget) == JobChannel::PushResult::Ok);
    CHECK(ch.push(text, budget) == JobChannel::PushResult::Ok);
    CHECK(ch.push(text, budget) == JobChannel::PushResult::Ok);
    CHECK(ch.buffered_bytes() == budget);
    CHECK(ch.push(text, budget) == JobChannel::PushResult::OverBudget);
    JobEvent end;
    end.kind = JobEvent::Kind::Error;
    CHECK(ch.push(end, budget) == JobChannel::PushResult::Ok);  // the reader must learn the end
    CHECK(ch.pop_all(std::chrono::milliseconds(1)).size() == 4);
    CHECK(ch.buffered_bytes() == 0);
    CHECK(ch.push(text, budget) == JobChannel::PushResult::Ok);  // taken: room again
    ch.close();
    // the reader left: each event is dropped at once
    CHECK(ch.push(text, budget) == JobChannel::PushResult::Closed);
    CHECK(ch.push(end, budget) == JobChannel::PushResult::Closed);
}

TEST_CASE("BoundedQueue: a push waiting for room gets it when the reader takes an item") {
    BoundedQueue<int> q(1);
    REQUIRE(q.push(1) == BoundedQueue<int>::PushResult::Ok);
    std::thread reader([&] {
        // the writer below is (or soon will be) waiting for room; a long timeout keeps the
        // test free of timing: the pop answers as soon as the first item is there
        CHECK(q.pop(std::chrono::seconds(30)) == std::optional<int>(1));
    });
    CHECK(q.push(2, std::chrono::seconds(30)) == BoundedQueue<int>::PushResult::Ok);
    reader.join();
    CHECK(q.pop_all(std::chrono::milliseconds(0)) == std::vector<int>{2});
}

namespace {

// Writes `text` to a file `name` in this process's scratch directory; returns its path.
std::string scratch_file(const std::string& name, const std::string& text) {
    const auto path = k3::test::process_scratch_root() / name;
    k3::test::write_file(path, text);
    return path.string();
}

}  // namespace

TEST_CASE("config precedence: defaults < config file < environment < command line") {
    unsetenv("K3SERVE_PORT");
    unsetenv("K3SERVE_HOST");
    DaemonConfig d = parse_daemon_args({"serve", "/models/m"});
    CHECK(d.host == "127.0.0.1");
    CHECK(d.port == 8080);
    CHECK(d.model_alias == "m");
    CHECK(d.threads >= 1);

    std::string file = scratch_file("k3serve_test.json",
                                  R"({"_comment": "x", "port": 9000, "queue_depth": 3, "api_key": ["a", "b"],
                                      "cors_origin": "http://x.example", "deadline_s": 12.5, "model": "/models/from-file"})");
    DaemonConfig f = parse_daemon_args({"serve", "--config", file});
    CHECK(f.port == 9000);
    CHECK(f.queue_depth == 3);
    CHECK(f.api_keys.size() == 2);
    CHECK(f.deadline_s == 12.5);
    CHECK(f.model_dir == "/models/from-file");

    setenv("K3SERVE_PORT", "9100", 1);
    CHECK(parse_daemon_args({"serve", "--config", file}).port == 9100);
    DaemonConfig cli = parse_daemon_args({"serve", "--config", file, "--port", "9200", "--queue-depth=5", "/models/cli"});
    CHECK(cli.port == 9200);
    CHECK(cli.queue_depth == 5);
    CHECK(cli.model_dir == "/models/cli");
    unsetenv("K3SERVE_PORT");
    // The effective config never shows keys.
    CHECK(f.to_json()["api_keys"] == 2);
}

TEST_CASE("config refusals name the flag or key") {
    auto refuses = [](std::vector<std::string> args, const std::string& needle, ErrorKind kind) {
        try {
            parse_daemon_args(args);
            FAIL("accepted: " << args.back());
        } catch (const Error& e) {
            CHECK(e.kind() == kind);
            CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
            CHECK(exit_code_for(e.kind()) == 2);
        }
    };
    refuses({"serve", "m", "--port", "99999"}, "port", ErrorKind::Usage);
    refuses({"serve", "m", "--bogus", "1"}, "--bogus", ErrorKind::Usage);
    refuses({"serve", "m", "--queue-depth"}, "missing value", ErrorKind::Usage);
    refuses({"serve", "m", "--log-format", "xml"}, "log_format", ErrorKind::Usage);
    refuses({"serve"}, "MODEL_DIR", ErrorKind::Usage);
    refuses({"serve", "m", "--config", "/nonexistent/k3.json"}, "/nonexistent/k3.json", ErrorKind::Config);
    std::string bad_key = scratch_file("k3serve_bad_key.json", R"({"prot": 80})");
    refuses({"serve", "m", "--config", bad_key}, "unknown key 'prot'", ErrorKind::Config);
    std::string bad_json = scratch_file("k3serve_bad_json.json", R"({"port": )");
    refuses({"serve", "m", "--config", bad_json}, "not valid JSON", ErrorKind::Config);
    std::string bad_value = scratch_file("k3serve_bad_value.json", R"({"port": "eighty"})");
    refuses({"serve", "m", "--config", bad_value}, "port", ErrorKind::Config);
}

TEST_CASE("the example config parses") {
    std::string src = std::getenv("K3_SOURCE_DIR") ? std::getenv("K3_SOURCE_DIR") : ".";
    DaemonConfig c = parse_daemon_args({"serve", "--config", src + "/config/k3serve.example.json"});
    CHECK(c.host == "127.0.0.1");
    CHECK_FALSE(c.model_dir.empty());
}

TEST_CASE("histograms are cumulative and metrics render every series") {
    Histogram h({1, 2});
    h.observe(0.5);
    h.observe(1.5);
    h.observe(5);
    std::string out;
    h.render(out, "x", "help");
    CHECK(out.find("x_bucket{le=\"1\"} 1\n") != std::string::npos);
    CHECK(out.find("x_bucket{le=\"2\"} 2\n") != std::string::npos);
    CHECK(out.find("x_bucket{le=\"+Inf\"} 3\n") != std::string::npos);
    CHECK(out.find("x_count 3\n") != std::string::npos);
    CHECK(read_process_memory().rss_bytes > 0);
}

TEST_CASE("worker: streams events, honours cancel, keeps the session across jobs") {
    FakeTokenizer tok;
    FakeEngineOptions o;
    o.token_delay = std::chrono::milliseconds(5);
    FakeEngine engine(o);
    JobQueue queue(4);
    Metrics metrics;
    WorkerOptions wo;
    wo.n_ctx = 128;
    EngineWorker worker(engine, tok, queue, metrics, wo);
    worker.start();

    auto run = [&](std::vector<int32_t> prompt, int max_tokens) {
        auto job = std::make_shared<Job>();
        job->prompt = std::move(prompt);
        job->params.max_tokens = max_tokens;
        REQUIRE(queue.push(job) == JobQueue::PushResult::Ok);
        return job;
    };
    auto collect = [](Job& job) {
        std::string text;
        for (;;)
            for (auto& e : job.channel->pop_all(std::chrono::milliseconds(50))) {
                text += e.content;
                if (e.kind != JobEvent::Kind::Delta) return std::make_pair(text, e);
            }
    };

    auto a = run(bytes_of("hello"), 4);
    auto [text_a, done_a] = collect(*a);
    CHECK(text_a == "The ");
    CHECK(done_a.kind == JobEvent::Kind::Done);
    CHECK(done_a.usage.cached_tokens == 0);

    // The same prompt extended: everything before is reused.
    auto b = run(bytes_of("hello world"), 2);
    auto [text_b, done_b] = collect(*b);
    CHECK(done_b.usage.cached_tokens == 5);

    // Cancel while running.
    auto c = run(bytes_of("x"), 1000);
    REQUIRE(c->channel->pop_all(std::chrono::milliseconds(2000)).size() > 0);
    c->request_cancel(CancelReason::ClientGone);
    auto [text_c, end_c] = collect(*c);
    CHECK(end_c.kind == JobEvent::Kind::Error);
    CHECK(end_c.usage.completion_tokens < 1000);
    CHECK(metrics.requests(RequestOutcome::Cancelled) == 1);

    queue.close();
    worker.join();
    CHECK(metrics.requests(RequestOutcome::Ok) == 2);
}

TEST_CASE("prompt lookup: drafts what followed the latest match, and continues a cycle past the end") {
    using V = std::vector<int32_t>;
    // no earlier occurrence of the last 2 or 3 tokens: no draft
    CHECK(prompt_lookup_draft(V{1, 2, 3, 4, 5}, 4).empty());
    CHECK(prompt_lookup_draft(V{1, 2, 3}, 0).empty());
    // "7 8" occurred at 1..2, followed by 9 1 2 ...: the draft is what followed there
    CHECK(prompt_lookup_draft(V{5, 7, 8, 9, 1, 2, 7, 8}, 3) == V{9, 1, 2});
    // the latest match wins over an earlier one ("3 4" followed by 5 first, by 6 later)
    CHECK(prompt_lookup_draft(V{3, 4, 5, 0, 3, 4, 6, 0, 3, 4}, 1) == V{6});
    // a 3-token key is preferred to a 2-token one
    CHECK(prompt_lookup_draft(V{1, 2, 3, 9, 2, 3, 8, 1, 2, 3}, 1) == V{9});
    // a cycle of period 1 and 3: the latest match is one period back, and the draft goes on
    // with the cycle for as many tokens as asked, not only the period's worth
    CHECK(prompt_lookup_draft(V{4, 4, 4, 4}, 6) == V{4, 4, 4, 4, 4, 4});
    CHECK(prompt_lookup_draft(V{0, 1, 2, 3, 1, 2, 3, 1, 2, 3}, 7) == V{1, 2, 3, 1, 2, 3, 1});
}

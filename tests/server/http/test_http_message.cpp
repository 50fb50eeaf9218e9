// The HTTP layer's own request and response types (server/http/message.h) and the query parser
// that fills a request's parameters (server/http/query_string.h): header names in any case,
// the order fields go out in, what set_content and add_header refuse or replace, and a
// streamed response telling its owner how the stream ended, once.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "http/message.h"
#include "http/query_string.h"
#include "http/response_writer.h"

using namespace k3::server;

TEST_CASE("http message: header names are found in any case, the first field of a name wins") {
    HttpRequest req;
    req.headers.emplace("Content-Type", "application/json");
    req.headers.emplace("x-api-key", "first");
    req.headers.emplace("X-API-KEY", "second");
    CHECK(req.has_header("content-type"));
    CHECK(req.has_header("CONTENT-TYPE"));
    CHECK(req.header("content-TYPE") == "application/json");
    CHECK(req.header("X-Api-Key") == "first");
    CHECK(req.headers.count("x-api-key") == 2);
    CHECK_FALSE(req.has_header("Authorization"));
    CHECK(req.header("Authorization").empty());
    // A name that is a prefix of another is a different name.
    CHECK_FALSE(req.has_header("Content"));
}

TEST_CASE("http message: a response's fields go out sorted by name, one name's fields in the order added") {
    HttpResponse res;
    res.add_header("X-Accel-Buffering", "no");
    res.add_header("retry-after", "2");
    res.add_header("Cache-Control", "no-cache");
    res.add_header("Retry-After", "5");
    res.set_content("{}", "application/json");
    const std::string head = response_head(res, 1, false, res.body.size(), true);
    CHECK(head == "HTTP/1.1 200 OK\r\n"
                  "Cache-Control: no-cache\r\n"
                  "Content-Type: application/json\r\n"
                  "retry-after: 2\r\n"
                  "Retry-After: 5\r\n"
                  "X-Accel-Buffering: no\r\n"
                  "Content-Length: 2\r\n"
                  "\r\n");
    CHECK(res.header("RETRY-AFTER") == "2");
}

TEST_CASE("http message: add_header drops a field that would split the head; set_content replaces the type") {
    HttpResponse res;
    res.add_header("X-Evil", "a\r\nSet-Cookie: b");
    res.add_header("X-Evil\n", "a");
    CHECK(res.headers.empty());
    res.add_header("content-type", "text/plain");
    res.set_content("<p>", "text/html");
    REQUIRE(res.headers.count("Content-Type") == 1);
    CHECK(res.header("Content-Type") == "text/html");
    CHECK(res.body == "<p>");
    const char bytes[] = {'a', '\0', 'b'};
    res.set_content(bytes, sizeof bytes, "application/octet-stream");
    CHECK(res.body == std::string(bytes, 3));
    CHECK(res.headers.count("content-type") == 1);
    CHECK_FALSE(res.streamed());
}

TEST_CASE("http message: a streamed response tells how its stream ended, once, when it goes") {
    std::vector<bool> ends;
    std::string written;
    {
        HttpResponse res;
        int calls = 0;
        res.stream(
            "text/event-stream",
            [&calls](StreamSink& sink) {
                if (++calls == 3) {
                    sink.done();
                    return true;
                }
                return sink.write("data: x\n\n", 9);
            },
            [&ends](bool complete) { ends.push_back(complete); });
        CHECK(res.streamed());
        CHECK(res.header("Content-Type") == "text/event-stream");
        StreamSink sink;
        bool done = false;
        sink.write = [&](const char* d, size_t n) {
            written.append(d, n);
            return true;
        };
        sink.done = [&] { done = true; };
        while (!done) REQUIRE(res.provide(sink));
        res.set_stream_complete(true);
        // Moved: the new owner ends it, the old one has nothing left to end.
        HttpResponse moved = std::move(res);
        CHECK(ends.empty());
    }
    CHECK(written == "data: x\n\ndata: x\n\n");
    CHECK(ends == std::vector<bool>{true});

    // Never written (or replaced by an error answer): ended as incomplete.
    ends.clear();
    {
        HttpResponse res;
        res.stream("text/event-stream", [](StreamSink&) { return false; }, [&ends](bool complete) { ends.push_back(complete); });
        res = HttpResponse();
        CHECK(ends == std::vector<bool>{false});
        CHECK_FALSE(res.streamed());
    }
    CHECK(ends == std::vector<bool>{false});
}

TEST_CASE("http message: query strings are split on '&' and '=', percent-decoded, '+' read as a space") {
    HttpRequest req;
    parse_query("since=12&q=a%20b+c&flag&empty=&since=13&bad=%zz%4&x%3Dy=1", req.params);
    CHECK(req.has_param("since"));
    CHECK(req.param("since") == "12");  // the first of two
    CHECK(req.params.count("since") == 2);
    CHECK(req.param("q") == "a b c");
    CHECK(req.has_param("flag"));
    CHECK(req.param("flag").empty());
    CHECK(req.has_param("empty"));
    CHECK(req.param("bad") == "%zz%4");  // not an escape: kept as sent
    CHECK(req.param("x=y") == "1");
    // Parameter names are case-sensitive, unlike header names.
    CHECK_FALSE(req.has_param("SINCE"));
    CHECK(req.param("missing").empty());
    HttpRequest none;
    parse_query("", none.params);
    parse_query("&&", none.params);
    CHECK(none.params.empty());
}

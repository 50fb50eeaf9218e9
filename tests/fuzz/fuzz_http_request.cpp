// The HTTP request reader (server/http/request_parser.h) on arbitrary bytes, delivered in
// pieces of a size the input chooses: never reads past its caps, and a request it accepts obeys
// them (body within the limit, header count within the limit).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_common.h"
#include "http/request_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    k3::server::RequestLimits limits;
    limits.max_body = 4096;
    limits.max_headers = 16;
    limits.max_header_bytes = 2048;
    limits.max_request_line = 512;
    size_t step = size_t(data[0] % 64) + 1;
    std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
    k3::server::RequestParser parser(limits);
    std::string pending;
    for (size_t pos = 0; pos < input.size(); pos += step) {
        pending.append(input.substr(pos, step));
        for (;;) {
            size_t used = parser.feed(pending);
            K3_FUZZ_CHECK(used <= pending.size(), "feed() used more bytes than it was given");
            pending.erase(0, used);
            if (parser.state() == k3::server::RequestParser::State::Failed) {
                K3_FUZZ_CHECK(parser.error_status() >= 400 && parser.error_status() < 600, "error status");
                return 0;
            }
            if (parser.state() != k3::server::RequestParser::State::Complete) break;
            const auto& r = parser.request();
            K3_FUZZ_CHECK(r.body.size() <= limits.max_body, "body over the limit");
            K3_FUZZ_CHECK(r.headers.size() <= limits.max_headers, "too many headers");
            K3_FUZZ_CHECK(!r.method.empty() && !r.target.empty(), "complete request without a request line");
            parser.reset();  // pipelined: the rest is the next request
        }
        K3_FUZZ_CHECK(pending.size() <= step + limits.max_header_bytes, "unparsed input grows");
    }
    return 0;
}

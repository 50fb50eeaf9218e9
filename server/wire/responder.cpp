#include "wire/responder.h"

#include <cstdio>
#include <random>

#include "http/sse.h"
#include "wire/generation_request.h"

namespace k3::server {

std::string Responder::stream_error(const ApiError& error) { return sse::data(dump(error_body(error))) + sse::done(); }

std::string random_id(const char* prefix) {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    char buf[32];
    std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)rng());
    return std::string(prefix) + buf;
}

}  // namespace k3::server

// Writing an answer to a client socket: the status line and headers, then the body whole
// (Content-Length), chunked (a streamed body over HTTP/1.1) or raw until the connection closes
// (a streamed body over HTTP/1.0), each write waiting at most the write timeout for the client
// to make room (docs/operations.md "A client that stops reading").
#pragma once
#include <cstddef>
#include <string>

#include "http/http_server.h"
#include "http/message.h"

namespace k3::server {

// The reason phrase of a status code ("Not Found"); a generic one for codes not listed.
const char* reason_phrase(int status);

// The status line and headers; `length` is size_t(-1) when the body has none to state.
std::string response_head(const HttpResponse& res, int version_minor, bool chunked, size_t length, bool keep);

// Writes all of `data`, waiting at most `timeout_s` for the client to make room each time.
bool write_all(int fd, const char* data, size_t size, double timeout_s);

// Writes `res` (a streamed body's provider is run to the end, and the response learns whether
// it went out whole). Sets `keep` false when the body's end must be the connection's end; marks
// `current` committed once the head goes. Returns false when the client could not be written to.
bool write_response(int fd, int version_minor, bool head_only, HttpResponse& res, bool& keep, double timeout,
                    CurrentConnection& current);

}  // namespace k3::server

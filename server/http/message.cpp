#include "http/message.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace k3::server {

bool HeaderNameLess::operator()(const std::string& a, const std::string& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](unsigned char x, unsigned char y) {
        return std::tolower(x) < std::tolower(y);
    });
}

std::string header_value(const HttpHeaders& headers, const std::string& name) {
    // The first field added under the name (find() may land on any of them).
    auto [first, last] = headers.equal_range(name);
    return first != last ? first->second : "";
}

std::string HttpRequest::param(const std::string& name) const {
    auto [first, last] = params.equal_range(name);
    return first != last ? first->second : "";
}

HttpResponse::HttpResponse(HttpResponse&& other) noexcept
    : status(other.status), reason(std::move(other.reason)), headers(std::move(other.headers)),
      body(std::move(other.body)), provider_(std::move(other.provider_)), on_end_(std::move(other.on_end_)),
      stream_complete_(other.stream_complete_) {
    other.provider_ = nullptr;
    other.on_end_ = nullptr;
}

HttpResponse& HttpResponse::operator=(HttpResponse&& other) noexcept {
    if (this == &other) return *this;
    end_stream();
    status = other.status;
    reason = std::move(other.reason);
    headers = std::move(other.headers);
    body = std::move(other.body);
    provider_ = std::move(other.provider_);
    on_end_ = std::move(other.on_end_);
    stream_complete_ = other.stream_complete_;
    other.provider_ = nullptr;
    other.on_end_ = nullptr;
    return *this;
}

HttpResponse::~HttpResponse() { end_stream(); }

void HttpResponse::end_stream() {
    if (!on_end_) return;
    StreamEnd on_end = std::move(on_end_);
    on_end_ = nullptr;
    on_end(stream_complete_);
}

void HttpResponse::add_header(const std::string& name, const std::string& value) {
    if (name.find_first_of("\r\n") != std::string::npos || value.find_first_of("\r\n") != std::string::npos) return;
    headers.emplace(name, value);
}

void HttpResponse::set_content(std::string content, const std::string& content_type) {
    body = std::move(content);
    headers.erase("Content-Type");
    add_header("Content-Type", content_type);
}

void HttpResponse::set_content(const char* data, size_t size, const std::string& content_type) {
    set_content(std::string(data, size), content_type);
}

void HttpResponse::stream(const std::string& content_type, ContentProvider provider, StreamEnd on_end) {
    end_stream();
    headers.erase("Content-Type");
    add_header("Content-Type", content_type);
    provider_ = std::move(provider);
    on_end_ = std::move(on_end);
    stream_complete_ = false;
}

}  // namespace k3::server

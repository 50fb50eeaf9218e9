#include "http/request_parser.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace k3::server {

namespace {

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
    return true;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// RFC 9110 token characters (header names, methods).
bool is_token_char(unsigned char c) {
    return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(char(c)) != std::string_view::npos;
}

bool is_token(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_token_char(static_cast<unsigned char>(c)); });
}

// Visible ASCII only: a target with a control byte or a space is refused, not logged.
bool is_valid_target(std::string_view s) {
    if (s.empty() || (s[0] != '/' && s != "*")) return false;
    return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Header values may hold visible ASCII, spaces, tabs and obs-text, nothing else.
bool is_valid_value(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) {
        auto u = static_cast<unsigned char>(c);
        return u == '\t' || u >= 0x20 ? u != 0x7f : false;
    });
}

}  // namespace

std::string ParsedRequest::header(std::string_view name) const {
    for (const auto& [k, v] : headers)
        if (iequals(k, name)) return v;
    return {};
}

void RequestParser::reset() {
    state_ = State::Head;
    request_ = ParsedRequest{};
    line_.clear();
    head_bytes_ = 0;
    have_request_line_ = false;
    chunked_ = false;
    body_remaining_ = 0;
    chunk_step_ = ChunkStep::Size;
    chunk_remaining_ = 0;
    trailer_bytes_ = 0;
    error_status_ = 0;
    error_message_.clear();
}

bool RequestParser::fail(int status, std::string message) {
    state_ = State::Failed;
    error_status_ = status;
    error_message_ = std::move(message);
    return false;
}

size_t RequestParser::feed(std::string_view data) {
    size_t used = 0;
    while (used < data.size() && (state_ == State::Head || state_ == State::Body)) {
        if (state_ == State::Head) {
            // Assemble one line, enforcing the caps on what has no newline yet.
            size_t nl = data.find('\n', used);
            size_t take = (nl == std::string_view::npos ? data.size() : nl + 1) - used;
            line_.append(data.substr(used, take));
            used += take;
            head_bytes_ += take;
            if (!have_request_line_ && line_.size() > limits_.max_request_line) {
                fail(414, "the request line is longer than " + std::to_string(limits_.max_request_line) + " bytes");
                return used;
            }
            if (have_request_line_ && head_bytes_ > limits_.max_header_bytes) {
                fail(431, "the request headers are larger than " + std::to_string(limits_.max_header_bytes) + " bytes");
                return used;
            }
            if (line_.empty() || line_.back() != '\n') continue;
            std::string_view line(line_);
            line.remove_suffix(1);
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
            bool ok = take_head_line(line);
            line_.clear();
            if (!ok) return used;
        } else if (chunked_) {
            used += feed_chunked(data.substr(used));
        } else {
            size_t take = std::min(body_remaining_, data.size() - used);
            request_.body.append(data.substr(used, take));
            used += take;
            body_remaining_ -= take;
            if (body_remaining_ == 0) state_ = State::Complete;
        }
    }
    return used;
}

bool RequestParser::take_head_line(std::string_view line) {
    if (!have_request_line_) {
        if (line.empty() && request_.method.empty()) return true;  // tolerated blank line before a request
        size_t sp1 = line.find(' ');
        size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
        if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
            return fail(400, "malformed request line");
        std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                         version = line.substr(sp2 + 1);
        if (!is_token(method)) return fail(400, "malformed method");
        if (!is_valid_target(target)) return fail(400, "malformed request target");
        if (version == "HTTP/1.1") request_.version_minor = 1;
        else if (version == "HTTP/1.0") request_.version_minor = 0;
        else return fail(505, "only HTTP/1.0 and HTTP/1.1 are supported");
        request_.method = std::string(method);
        request_.target = std::string(target);
        have_request_line_ = true;
        head_bytes_ = 0;
        return true;
    }
    if (line.empty()) return finish_head();
    if (line[0] == ' ' || line[0] == '\t') return fail(400, "folded header lines are not accepted");
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) return fail(400, "malformed header line");
    std::string_view value = trim(line.substr(colon + 1));
    if (!is_valid_value(value)) return fail(400, "a header value holds a control character");
    if (request_.headers.size() >= limits_.max_headers)
        return fail(431, "more than " + std::to_string(limits_.max_headers) + " request headers");
    request_.headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
    return true;
}

bool RequestParser::finish_head() {
    ParsedRequest& r = request_;
    // Content-Length: digits only, every copy the same, no larger than the cap.
    bool has_length = false;
    size_t length = 0;
    for (const auto& [k, v] : r.headers) {
        if (!iequals(k, "Content-Length")) continue;
        if (v.empty() || v.size() > 19 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
            return fail(400, "Content-Length must be a non-negative decimal number, got '" + v + "'");
        size_t n = std::stoull(v);
        if (has_length && n != length) return fail(400, "conflicting Content-Length headers");
        has_length = true;
        length = n;
    }
    // Host (RFC 9112 section 3.2): exactly one in HTTP/1.1 (at most one in 1.0), a plain
    // authority without spaces or a path.
    int hosts = 0;
    for (const auto& [k, v] : r.headers) {
        if (!iequals(k, "Host")) continue;
        ++hosts;
        if (!std::all_of(v.begin(), v.end(), [](char c) {
                return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("-._~!$&'()*+,;=:[]%", c) != nullptr;
            }))
            return fail(400, "the Host header '" + v + "' is not a host name or address");
    }
    if (hosts > 1) return fail(400, "a request must carry one Host header, not " + std::to_string(hosts));
    if (hosts == 0 && r.version_minor == 1) return fail(400, "an HTTP/1.1 request must carry a Host header");
    // Transfer-Encoding (RFC 9112 section 6.1): the codings of every line, in order; the one
    // accepted list is a single "chunked".
    std::vector<std::string> codings;
    bool has_te = false;
    for (const auto& [k, v] : r.headers) {
        if (!iequals(k, "Transfer-Encoding")) continue;
        has_te = true;
        size_t pos = 0;
        while (pos <= v.size()) {
            size_t comma = std::min(v.find(',', pos), v.size());
            std::string coding(trim(std::string_view(v).substr(pos, comma - pos)));
            if (!coding.empty()) codings.push_back(coding);
            pos = comma + 1;
        }
    }
    if (has_te) {
        if (has_length) return fail(400, "a request must not carry both Content-Length and Transfer-Encoding");
        for (const auto& coding : codings)
            if (!iequals(coding, "chunked")) return fail(501, "Transfer-Encoding '" + coding + "' is not supported (only chunked)");
        if (codings.size() != 1) return fail(400, "Transfer-Encoding must name chunked once, as the last coding");
        chunked_ = true;
    }
    // A compressed body could inflate far past the cap; nothing here needs one.
    for (const auto& [k, v] : r.headers)
        if (iequals(k, "Content-Encoding") && !iequals(trim(v), "identity"))
            return fail(415, "Content-Encoding '" + v + "' is not accepted; send the body uncompressed");
    std::string expect = r.header("Expect");
    if (!expect.empty()) {
        if (!iequals(trim(expect), "100-continue")) return fail(417, "Expect '" + expect + "' is not supported");
        r.expect_continue = true;
    }
    std::string connection = r.header("Connection");
    auto has_option = [&](std::string_view opt) {
        size_t pos = 0;
        while (pos <= connection.size()) {
            size_t comma = connection.find(',', pos);
            if (comma == std::string::npos) comma = connection.size();
            if (iequals(trim(std::string_view(connection).substr(pos, comma - pos)), opt)) return true;
            pos = comma + 1;
        }
        return false;
    };
    r.keep_alive = r.version_minor == 1 ? !has_option("close") : has_option("keep-alive");
    if (has_length && length > limits_.max_body)
        return fail(413, "the request body (" + std::to_string(length) + " bytes) is larger than " +
                             std::to_string(limits_.max_body) + " bytes");
    if (chunked_) {
        state_ = State::Body;
    } else if (length > 0) {
        // No reservation: the body grows as it arrives, once the head has been judged.
        body_remaining_ = length;
        state_ = State::Body;
    } else {
        state_ = State::Complete;
    }
    return true;
}

size_t RequestParser::feed_chunked(std::string_view data) {
    size_t used = 0;
    auto line_done = [&]() -> bool {  // assembles line_ up to '\n'; false while incomplete
        size_t nl = data.find('\n', used);
        size_t take = (nl == std::string_view::npos ? data.size() : nl + 1) - used;
        line_.append(data.substr(used, take));
        used += take;
        return !line_.empty() && line_.back() == '\n';
    };
    while (used < data.size() && state_ == State::Body) {
        switch (chunk_step_) {
            case ChunkStep::Size: {
                bool done = line_done();
                if (line_.size() > 1024) {
                    fail(400, "malformed chunk size line");
                    return used;
                }
                if (!done) break;
                size_t size = 0, i = 0;
                for (; i < line_.size() && hex_value(line_[i]) >= 0; ++i) {
                    size = size * 16 + size_t(hex_value(line_[i]));
                    if (size > limits_.max_body) break;
                }
                if (size > limits_.max_body || request_.body.size() + size > limits_.max_body) {
                    fail(413, "the chunked request body is larger than " + std::to_string(limits_.max_body) + " bytes");
                    return used;
                }
                // RFC 9112 section 7.1: 1*HEXDIG, then only chunk extensions (";" after
                // optional blanks) before the line end: "f junk" is not a size.
                size_t j = i;
                while (j < line_.size() && (line_[j] == ' ' || line_[j] == '\t')) ++j;
                const bool line_end = line_.compare(j, std::string::npos, "\r\n") == 0 || line_.compare(j, std::string::npos, "\n") == 0;
                if (i == 0 || (!line_end && line_[j] != ';')) {
                    fail(400, "malformed chunk size line");
                    return used;
                }
                line_.clear();
                chunk_remaining_ = size;
                chunk_step_ = size == 0 ? ChunkStep::Trailer : ChunkStep::Data;
                break;
            }
            case ChunkStep::Data: {
                size_t take = std::min(chunk_remaining_, data.size() - used);
                request_.body.append(data.substr(used, take));
                used += take;
                chunk_remaining_ -= take;
                if (chunk_remaining_ == 0) chunk_step_ = ChunkStep::DataEnd;
                break;
            }
            case ChunkStep::DataEnd: {
                bool done = line_done();
                if (line_.size() > 2) {
                    fail(400, "chunk data is longer than its size");
                    return used;
                }
                if (!done) break;
                if (line_ != "\r\n" && line_ != "\n") {
                    fail(400, "chunk data is longer than its size");
                    return used;
                }
                line_.clear();
                chunk_step_ = ChunkStep::Size;
                break;
            }
            case ChunkStep::Trailer: {
                bool done = line_done();
                if (trailer_bytes_ + line_.size() > limits_.max_header_bytes)
                    {
                    fail(431, "the chunked trailer is too large");
                    return used;
                }
                if (!done) break;
                bool end = line_ == "\r\n" || line_ == "\n";
                trailer_bytes_ += line_.size();
                line_.clear();
                if (end) state_ = State::Complete;  // trailer fields are read and dropped
                break;
            }
        }
    }
    return used;
}

}  // namespace k3::server

// Standard base64 (RFC 4648, with padding): the Messages API's thinking signature and the
// images requests carry inline (data: URLs, Anthropic base64 sources).
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace k3::server {

std::string base64_encode(std::string_view bytes);
// Decodes `text`; ASCII whitespace is skipped (MIME wraps lines), padding is optional but only at
// the end. Nothing (nullopt) for any other character or a dangling sextet.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace k3::server

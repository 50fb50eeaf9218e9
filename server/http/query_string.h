// A request target's query string ("a=1&b=x%20y") into its parameters, percent-decoded, '+'
// read as a space (the HTML form encoding clients use for GET parameters).
#pragma once
#include <string>

#include "http/message.h"

namespace k3::server {

void parse_query(const std::string& query, QueryParams& params);

}  // namespace k3::server

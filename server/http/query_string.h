// A request target's query string ("a=1&b=x%20y") into httplib's Params, percent-decoded,
// '+' read as a space (the HTML form encoding clients use for GET parameters).
#pragma once
#include <httplib.h>

#include <string>

namespace k3::server {

void parse_query(const std::string& query, httplib::Params& params);

}  // namespace k3::server

#pragma once
// Writing a JSON reply or an OpenAI-style error into a cpp-httplib response.
#include <httplib.h>

#include "app/server/api_error.h"

namespace kvs::server {

inline void send_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    if (e.status == 429 || e.status == 503) res.set_header("Retry-After", "1");
    if (e.status == 401) res.set_header("WWW-Authenticate", "Bearer");
    res.set_content(e.body(), "application/json");
}

inline void send_json(httplib::Response& res, const nlohmann::json& j) {
    res.status = 200;
    res.set_content(dump_json(j), "application/json");
}

}  // namespace kvs::server

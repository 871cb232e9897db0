#pragma once
// An HTTP API error as OpenAI (and vLLM's OpenAI server) write it:
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "top_p", "code": null}}
// with the HTTP status it goes out with. Every bad input the server sees becomes one of
// these (a 4xx); a 5xx is only for the engine failing, never for what a client sent.
#include <string>

#include <nlohmann/json.hpp>

namespace kvs::server {

struct ApiError {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";  // invalid_request_error, authentication_error, ...
    std::string param;                           // the request field at fault ("" -> null)
    std::string code;                            // a machine-readable code ("" -> null)

    nlohmann::json to_json() const;
    std::string body() const;
};

// Helpers for the common kinds.
ApiError bad_request(std::string message, std::string param = {}, std::string code = {});
ApiError not_found(std::string message, std::string param = {}, std::string code = {});

// JSON text of any value, with invalid UTF-8 replaced by U+FFFD instead of an exception
// (generated text is valid UTF-8, but a reply must never fail to serialize).
std::string dump_json(const nlohmann::json& j);

}  // namespace kvs::server

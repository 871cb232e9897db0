#include "app/server/api_error.h"

namespace kvs::server {

nlohmann::json ApiError::to_json() const {
    nlohmann::json e;
    e["message"] = message;
    e["type"] = type;
    e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
    e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
    return nlohmann::json{{"error", e}};
}

ApiError bad_request(std::string message, std::string param, std::string code) {
    return ApiError{400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}

ApiError not_found(std::string message, std::string param, std::string code) {
    return ApiError{404, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}

std::string ApiError::body() const { return dump_json(to_json()); }

std::string dump_json(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kvs::server

#pragma once
// Reading a small JSON settings file (config.json, quantize_config.json,
// adapter_config.json, ...) that must hold one JSON object. The errors name the file.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/status.h"

namespace kvs {

// The object in `path`; "<path>: cannot open" or "<path>: not a valid JSON object".
Result<nlohmann::json> read_json_object(const std::string& path);
// The same, but a missing file is an empty optional rather than an error.
Result<std::optional<nlohmann::json>> read_json_object_if_present(const std::string& path);

}  // namespace kvs

#include "engine/model/json_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvs {

using json = nlohmann::json;

Result<json> read_json_object(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Status::error(path + ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return Status::error(path + ": not a valid JSON object");
    return j;
}

Result<std::optional<json>> read_json_object_if_present(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return std::optional<json>();
    auto j = read_json_object(path);
    if (!j) return j.status();
    return std::optional<json>(std::move(*j));
}

}  // namespace kvs

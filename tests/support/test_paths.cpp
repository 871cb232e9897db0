#include "tests/support/test_paths.h"

#include <cstdlib>
#include <filesystem>

#include "engine/model/model_registry.h"

namespace kvs::test {

std::string default_model_path() {
    auto r = resolve_model(std::string(kDefaultModelName));
    return r ? r.value() : std::string();
}

std::string gemma3_model_path() {
    auto r = resolve_model(std::string(kGemma3ModelName));
    return r ? r.value() : std::string();
}

std::string find_python() {
    const char* xdg = std::getenv("XDG_DATA_HOME");
    const char* home = std::getenv("HOME");
    const std::string data = xdg && *xdg ? std::string(xdg) : std::string(home ? home : "") + "/.local/share";
    const std::string venv = data + "/kvscope/venv/bin/python";
    std::error_code ec;
    return std::filesystem::exists(venv, ec) ? venv : std::string("python3");
}

}  // namespace kvs::test

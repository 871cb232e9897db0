#include "engine/model/model_registry.h"

#include <cstdlib>
#include <filesystem>

namespace fs = std::filesystem;

namespace kvs {

std::string models_dir() {
    if (const char* d = std::getenv("KVSCOPE_MODELS_DIR"); d && *d) return d;
    if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return std::string(x) + "/kvscope/models";
    const char* home = std::getenv("HOME");
    return std::string(home && *home ? home : ".") + "/.local/share/kvscope/models";
}

std::vector<ModelEntry> list_models() {
    std::vector<ModelEntry> out;
    std::error_code ec;
    fs::directory_iterator it(models_dir(), ec);
    if (ec) return out;
    for (const auto& e : it) {
        const auto p = e.path();
        if (e.is_regular_file(ec) && p.extension() == ".gguf") {
            std::string name = p.filename().string();
            if (name == kDefaultModelFile) name = kDefaultModelName;
            else if (name == kGemma3ModelFile)
                name = kGemma3ModelName;
            out.push_back({name, p.string()});
        } else if (e.is_directory(ec) && fs::exists(p / "config.json", ec)) {
            out.push_back({p.filename().string(), p.string()});
        }
    }
    return out;
}

Result<std::string> resolve_model(const std::string& name_or_path) {
    std::error_code ec;
    if (name_or_path.empty()) return Result<std::string>::error("no model given");
    if (fs::exists(name_or_path, ec)) return name_or_path;
    for (const auto& m : list_models())
        if (m.name == name_or_path || fs::path(m.path).filename() == name_or_path) return m.path;
    std::string known;
    for (const auto& m : list_models()) known += (known.empty() ? "" : ", ") + m.name;
    std::string msg = "model '" + name_or_path + "' is neither a file nor an installed model in " + models_dir();
    msg += known.empty() ? " (none installed: run installer/fetch_model.sh)" : " (installed: " + known + ")";
    return Result<std::string>::error(msg);
}

}  // namespace kvs

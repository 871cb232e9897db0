#pragma once
// Finding models by name or path. Installed models live in the user's data dir:
// $KVSCOPE_MODELS_DIR, else $XDG_DATA_HOME/kvscope/models, else ~/.local/share/kvscope/models.
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/status.h"

namespace kvs {

inline constexpr std::string_view kDefaultModelName = "smollm2-135m";
inline constexpr std::string_view kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";
// Gemma 3 270M (installer/fetch_model.sh gemma3-270m)
inline constexpr std::string_view kGemma3ModelName = "gemma3-270m";
inline constexpr std::string_view kGemma3ModelFile = "gemma-3-270m-q4_k_m.gguf";

std::string models_dir();

struct ModelEntry {
    std::string name;  // short name usable with --model ("smollm2-135m", "gemma3-270m" or the file/folder name)
    std::string path;
};
// Every GGUF file and safetensors folder in models_dir().
std::vector<ModelEntry> list_models();

// A path to an existing file/folder is returned as is; a known short name or an
// installed file/folder name resolves inside models_dir(). Errors list what exists.
Result<std::string> resolve_model(const std::string& name_or_path);

}  // namespace kvs

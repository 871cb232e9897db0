#pragma once
// The LoRA adapters a Session serves, by name: loaded and unloaded at run time from any
// thread (a mutex guards the map). Requests hold an adapter through a shared_ptr, so
// unloading one never pulls it from under a request that is running with it.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/lora/lora_adapter.h"

namespace kvs {

// What a front end shows of a loaded adapter (a model list, `/v1/models`).
struct AdapterInfo {
    std::string name;
    std::string path;
    std::string format;  // "peft" or "gguf"
    int rank = 0;
    float alpha = 0;
    float scale = 0;  // alpha / r (or / sqrt(r)) x the user scale
    bool use_rslora = false;
    std::vector<std::string> targets;  // PEFT module names
    int64_t n_params = 0;
};
AdapterInfo adapter_info(const LoraAdapter& a);

class LoraRegistry {
public:
    // Loads path for `base` under `name` (letters, digits and . _ - : / only, at most 128);
    // an error (bad name, name taken, bad adapter) leaves the registry as it was.
    Result<AdapterInfo> load(const std::string& name, const std::string& path, const ModelConfig& base,
                             float user_scale);
    // False when no adapter has that name.
    bool unload(const std::string& name);
    std::vector<AdapterInfo> list() const;  // by name
    // The adapter of that name; an error naming the loaded ones when there is none.
    Result<std::shared_ptr<const LoraAdapter>> find(const std::string& name) const;

private:
    mutable std::mutex m_mutex;
    std::map<std::string, std::shared_ptr<const LoraAdapter>> m_adapters;
};

}  // namespace kvs

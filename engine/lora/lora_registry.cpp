#include "engine/lora/lora_registry.h"

namespace kvs {

AdapterInfo adapter_info(const LoraAdapter& a) {
    AdapterInfo i;
    i.name = a.name;
    i.path = a.path;
    i.format = a.format;
    i.rank = a.rank;
    i.alpha = a.alpha;
    i.scale = a.scale;
    i.use_rslora = a.use_rslora;
    i.targets = a.targets;
    i.n_params = a.n_params;
    return i;
}

namespace {
Status check_name(const std::string& name) {
    if (name.empty() || name.size() > 128)
        return Status::error("a LoRA adapter needs a name of 1 to 128 characters, got " + std::to_string(name.size()));
    for (char c : name) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                        c == '_' || c == '-' || c == ':' || c == '/';
        if (!ok)
            return Status::error("LoRA adapter name '" + name + "': only letters, digits and . _ - : / are allowed");
    }
    return Status::ok();
}
}  // namespace

Result<AdapterInfo> LoraRegistry::load(const std::string& name, const std::string& path, const ModelConfig& base,
                                       float user_scale) {
    KVS_RETURN_IF_ERROR(check_name(name));
    {
        std::lock_guard lk(m_mutex);
        if (m_adapters.count(name))
            return Result<AdapterInfo>::error("a LoRA adapter named '" + name +
                                              "' is already loaded (unload it first)");
    }
    auto a = load_lora_adapter(path, base, name, user_scale);  // slow part: outside the lock
    if (!a) return a.status();
    std::lock_guard lk(m_mutex);
    if (!m_adapters.emplace(name, a.value()).second)
        return Result<AdapterInfo>::error("a LoRA adapter named '" + name + "' is already loaded (unload it first)");
    return adapter_info(**a);
}

bool LoraRegistry::unload(const std::string& name) {
    std::lock_guard lk(m_mutex);
    return m_adapters.erase(name) > 0;
}

std::vector<AdapterInfo> LoraRegistry::list() const {
    std::lock_guard lk(m_mutex);
    std::vector<AdapterInfo> out;
    for (const auto& [name, a] : m_adapters) out.push_back(adapter_info(*a));
    return out;
}

Result<std::shared_ptr<const LoraAdapter>> LoraRegistry::find(const std::string& name) const {
    std::lock_guard lk(m_mutex);
    auto it = m_adapters.find(name);
    if (it != m_adapters.end()) return it->second;
    std::string names;
    for (const auto& [n, a] : m_adapters) names += (names.empty() ? "" : ", ") + n;
    return Result<std::shared_ptr<const LoraAdapter>>::error("no LoRA adapter named '" + name + "' is loaded (" +
                                                             (names.empty() ? "none are" : "loaded: " + names) + ")");
}

}  // namespace kvs

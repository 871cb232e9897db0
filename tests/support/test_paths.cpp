#include "tests/support/test_paths.h"

#include "engine/model/model_registry.h"

namespace kvs::test {

std::string default_model_path() {
    auto r = resolve_model(std::string(kDefaultModelName));
    return r ? r.value() : std::string();
}

}  // namespace kvs::test

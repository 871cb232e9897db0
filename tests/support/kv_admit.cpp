#include "tests/support/kv_admit.h"

namespace kvs::test {

int admit(KVCacheManager& m, RequestId id, const std::vector<int32_t>& prompt) {
    auto hit = m.get_computed_blocks(id, prompt);
    if (!hit) return -2;
    auto a = m.allocate_slots(id, prompt, static_cast<int>(prompt.size()) - *hit);
    if (!a) return -2;
    if (a->no_room) return -1;
    return *hit;
}

}  // namespace kvs::test

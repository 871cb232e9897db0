#pragma once
// Admitting a prompt into a KVCacheManager the way the scheduler does for a new request:
// look up its cached prefix, then allocate slots for the rest of the prompt.
#include <cstdint>
#include <vector>

#include "engine/kv_cache/kv_cache_manager.h"

namespace kvs::test {

// The prompt tokens found in the prefix cache; -1 when the pool has no room for the rest,
// -2 when the manager refused the request (an error).
int admit(KVCacheManager& m, RequestId id, const std::vector<int32_t>& prompt);

}  // namespace kvs::test

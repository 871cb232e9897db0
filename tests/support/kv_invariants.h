#pragma once
// The KV manager's and block pool's invariants, checked by the KV cache and scheduler tests.
#include <QString>

#include "engine/kv_cache/kv_cache_manager.h"

namespace kvs::test {

// Empty when all hold: the free queue lists exactly the blocks with ref_cnt 0, once each;
// every block's ref_cnt equals the number of block tables holding it; each table covers
// its tokens; the prefix-cache map and the blocks' hashes agree. Else what is wrong.
QString kv_pool_invariants(const KVCacheManager& m);

}  // namespace kvs::test

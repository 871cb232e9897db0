#pragma once
// The KV manager's and block pool's invariants, checked by the KV cache and scheduler tests.
#include <QString>

#include "engine/kv_cache/kv_cache_manager.h"

namespace kvs::test {

// Empty when all hold: the free queue lists exactly the blocks with ref_cnt 0, once each;
// every block's ref_cnt equals the number of block tables holding it; each table covers
// its tokens; the prefix-cache map and the blocks' hashes agree. Else what is wrong.
// With sliding-window layers in their own pool, swa_pool_invariants too.
QString kv_pool_invariants(const KVCacheManager& m);
// The local pool: each local table as long as its block table, ref_cnt = local table entries,
// nothing freed that the request's last position could still read, freed marks only on
// free blocks. Empty without a local pool.
QString swa_pool_invariants(const KVCacheManager& m);

}  // namespace kvs::test

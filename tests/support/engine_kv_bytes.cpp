#include "tests/support/engine_kv_bytes.h"

#include "engine/kv_cache/kv_tensors.h"

namespace kvs::test {

int64_t engine_kv_bytes_per_token(int n_layer, int n_kv_head, int head_dim, bool int8) {
    ModelConfig c;
    c.n_layer = n_layer;
    c.n_kv_head = n_kv_head;
    c.head_dim = head_dim;
    return kv_cache_bytes_per_token(c, int8 ? DType::Q8_0 : DType::F16);
}

}  // namespace kvs::test

#include "engine/telemetry/op_roofline.h"

#include <algorithm>

namespace kvs {

const char* op_kind_name(OpKind k) {
    switch (k) {
        case OpKind::qkv: return "qkv";
        case OpKind::attn_out: return "attn_out";
        case OpKind::ffn_gate_up: return "ffn_gate_up";
        case OpKind::ffn_down: return "ffn_down";
        case OpKind::attention: return "attention";
        case OpKind::lm_head: return "lm_head";
        case OpKind::elementwise: return "elementwise";
    }
    return "?";
}

int decode_batch_class(int decode_tokens) {
    int c = 1;
    while (c * 2 <= decode_tokens) c *= 2;
    return c;
}

void keep_op_step(std::vector<OpStepRecord>& history, const OpStepRecord& step) {
    auto same = [&](const OpStepRecord& r) {
        return r.prefill == step.prefill &&
               (step.prefill || decode_batch_class(r.decode_tokens) == decode_batch_class(step.decode_tokens));
    };
    for (const OpStepRecord& r : history)
        if (step.prefill && same(r) && r.n_tokens > step.n_tokens) return;  // a larger prefill stays
    std::erase_if(history, same);
    history.push_back(step);
    std::stable_sort(history.begin(), history.end(), [](const OpStepRecord& a, const OpStepRecord& b) {
        if (a.prefill != b.prefill) return a.prefill;
        return decode_batch_class(a.decode_tokens) < decode_batch_class(b.decode_tokens);
    });
}

}  // namespace kvs

#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/cli/commands.h"

namespace kvs::app {
namespace {
std::string human_bytes(double b) {
    char buf[64];
    if (b >= 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024)
        std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024));
    else
        std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
    return buf;
}
}  // namespace

int cmd_inspect(const InspectOptions& o) {
    auto session = open_session_or_report(o.model);
    if (!session) return 1;
    const Model* model = &session->model();
    const ModelConfig& c = model->config;
    const int ctx = o.ctx > 0 ? o.ctx : c.n_ctx_train;
    const int64_t kv_tok = session->kv_bytes_per_token(DType::F16);
    int64_t kv_total = 0;
    if (__builtin_mul_overflow(kv_tok, int64_t{ctx} * o.batch, &kv_total)) {
        std::fprintf(stderr, "error: the KV cache of %d tokens x %d sequences does not fit in 64 bits\n", ctx, o.batch);
        return 1;
    }
    if (o.json) {
        nlohmann::json j;
        j["path"] = model->path;
        j["format"] = model->format;
        j["name"] = c.name;
        j["architecture"] = c.arch;
        j["n_layer"] = c.n_layer;
        j["n_embd"] = c.n_embd;
        j["n_ff"] = c.n_ff;
        j["n_head"] = c.n_head;
        j["n_kv_head"] = c.n_kv_head;
        j["head_dim"] = c.head_dim;
        j["n_vocab"] = c.n_vocab;
        j["n_ctx_train"] = c.n_ctx_train;
        j["rope_freq_base"] = c.rope_freq_base;
        j["tied_embeddings"] = c.tied_embeddings;
        if (c.sliding_window > 0) {
            j["sliding_window"] = c.sliding_window;
            j["rope_freq_base_swa"] = c.rope_freq_base_swa;
            j["sliding_window_layers"] = c.layer_swa;  // [n_layer] 1 = local
        }
        j["file_type"] = model->file_type;
        j["tensor_types"] = model->tensor_types;
        j["n_tensors"] = model->n_tensors;
        j["n_params"] = model->n_params;
        j["weight_bytes"] = model->weight_bytes;
        j["kv_bytes_per_token_f16"] = kv_tok;
        j["kv_ctx"] = ctx;
        j["kv_batch"] = o.batch;
        j["kv_bytes_total_f16"] = kv_total;
        std::printf("%s\n", j.dump(2).c_str());
        return 0;
    }
    std::printf("model          %s\n", model->path.c_str());
    std::printf("format         %s\n", model->format.c_str());
    std::printf("name           %s\n", c.name.c_str());
    std::printf("architecture   %s (%d layers, n_embd %d, n_ff %d, %d heads, %d KV heads, head dim %d)\n",
                c.arch.c_str(), c.n_layer, c.n_embd, c.n_ff, c.n_head, c.n_kv_head, c.head_dim);
    std::printf("vocabulary     %d tokens (%s tokenizer)\n", c.n_vocab, model->vocab.model.c_str());
    std::printf("context        %d tokens trained; RoPE base %.0f, %s\n", c.n_ctx_train, c.rope_freq_base,
                c.rope_style == RopeStyle::Neox ? "neox" : "normal");
    if (c.sliding_window > 0) {
        std::string pattern;
        int n_local = 0;
        for (int il = 0; il < c.n_layer; ++il) {
            pattern += c.is_swa(il) ? 'L' : 'G';
            n_local += c.is_swa(il) ? 1 : 0;
        }
        std::printf("attention      %d local layers (sliding window %d, RoPE base %.0f), %d global: %s\n", n_local,
                    c.sliding_window, c.rope_freq_base_swa, c.n_layer - n_local, pattern.c_str());
    }
    if (c.gemma)
        std::printf("gemma          embeddings x %.3f, GeGLU MLP, Q/K norms, post-attention and post-MLP norms\n",
                    c.embd_scale);
    std::printf("embeddings     %s\n",
                c.tied_embeddings ? "tied (output head = token embedding)" : "separate output head");
    std::printf("parameters     %.1f M\n", model->n_params / 1e6);
    std::printf("weights        %s in %lld tensors (file type %s)\n", human_bytes(double(model->weight_bytes)).c_str(),
                static_cast<long long>(model->n_tensors), model->file_type.c_str());
    std::printf("tensor types  ");
    for (const auto& [t, n] : model->tensor_types) std::printf(" %s x%d", t.c_str(), n);
    std::printf("\n");
    std::printf("KV per token   %lld bytes (F16) = 2 x %d layers x %d KV heads x %d head dim x 2 bytes\n",
                static_cast<long long>(kv_tok), c.n_layer, c.n_kv_head, c.head_dim);
    std::printf("KV total       %s for context %d x batch %d (F16)\n", human_bytes(double(kv_total)).c_str(), ctx,
                o.batch);
    std::printf("weights + KV   %s\n", human_bytes(double(kv_total + model->weight_bytes)).c_str());
    if (o.tensors) {
        std::printf("\n%-28s %-6s %10s %10s\n", "tensor", "type", "n_in", "n_out");
        auto row = [](const std::string& n, const WeightView& w) {
            std::printf("%-28s %-6s %10lld %10lld\n", n.c_str(), std::string(dtype_name(w.dtype)).c_str(),
                        static_cast<long long>(w.n_in), static_cast<long long>(w.n_out));
        };
        row("token_embd", model->token_embd);
        for (size_t i = 0; i < model->layers.size(); ++i) {
            const auto& l = model->layers[i];
            const std::string p = "blk." + std::to_string(i) + ".";
            row(p + "attn_q", l.wq);
            row(p + "attn_k", l.wk);
            row(p + "attn_v", l.wv);
            row(p + "attn_output", l.wo);
            row(p + "ffn_gate", l.w_gate);
            row(p + "ffn_up", l.w_up);
            row(p + "ffn_down", l.w_down);
        }
        if (!c.tied_embeddings) row("output", model->output);
    }
    return 0;
}

}  // namespace kvs::app

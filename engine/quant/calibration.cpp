// Calibration: activations of the reference model through LlamaForward's observer hook.
#include "engine/quant/calibration.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "engine/kv_cache/kv_tensors.h"
#include "engine/model/llama_forward.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvs {

namespace {

// Copies the sampled rows of one observed activation into the layer's buffer.
struct RowSampler {
    int skip = 0;         // positions before this are not kept
    int stride = 1;       // keep tokens whose position - skip is a multiple of stride
    int n_rows = 0;       // rows the buffers hold
    int chunk_start = 0;  // position of the current chunk's first token

    void keep(const float* x, int n_tokens, int n, std::vector<float>& dst) const {
        if (dst.empty()) dst.assign(static_cast<size_t>(n_rows) * n, 0.0f);
        for (int t = 0; t < n_tokens; ++t) {
            const int pos = chunk_start + t - skip;
            if (pos < 0 || pos % stride != 0 || pos / stride >= n_rows) continue;
            std::memcpy(dst.data() + static_cast<size_t>(pos / stride) * n, x + static_cast<size_t>(t) * n,
                        sizeof(float) * static_cast<size_t>(n));
        }
    }
};

}  // namespace

Result<CalibrationData> collect_activations(std::shared_ptr<const Model> model, const std::vector<int32_t>& tokens,
                                            const CalibrationOptions& options) {
    using R = Result<CalibrationData>;
    if (!model) return R::error("calibration: no model");
    const ModelConfig& c = model->config;
    const int n = static_cast<int>(tokens.size());
    if (n == 0) return R::error("calibration: no calibration tokens (AWQ needs a calibration text)");
    if (c.n_ctx_train > 0 && n > c.n_ctx_train)
        return R::error("calibration: " + std::to_string(n) + " tokens exceed the model's context of " +
                        std::to_string(c.n_ctx_train) + " tokens");
    if (options.max_rows < 1 || options.chunk < 1 || options.skip_first < 0 || options.seq_len < 0)
        return R::error("calibration: max_rows and chunk must be at least 1, skip_first and seq_len at least 0");
    const int seq_len = options.seq_len == 0 ? n : std::min(options.seq_len, n);
    const int n_kept = n - options.skip_first;
    if (n_kept < 1)
        return R::error("calibration: " + std::to_string(n) + " tokens leave none to sample after skipping the first " +
                        std::to_string(options.skip_first));

    RowSampler sampler;
    sampler.skip = options.skip_first;
    sampler.stride = (n_kept + options.max_rows - 1) / options.max_rows;
    sampler.n_rows = (n_kept + sampler.stride - 1) / sampler.stride;
    CalibrationData data;
    data.n_rows = sampler.n_rows;
    data.n_tokens = n;
    data.seq_len = seq_len;
    data.layers.resize(static_cast<size_t>(c.n_layer));

    auto backend = make_cpu_backend(options.n_threads);
    constexpr int kBlock = 16;
    const int n_blocks = (seq_len + kBlock - 1) / kBlock;  // one sequence's; the next reuses them
    auto kv = KvTensors::create(*backend, c, n_blocks, kBlock);
    if (!kv) return R::error("calibration: " + kv.message());
    const int chunk = std::min(options.chunk, seq_len);
    auto made = LlamaForward::create(model, *backend, **kv, chunk);
    if (!made) return R::error("calibration: " + made.message());
    LlamaForward& forward = **made;
    forward.set_activation_observer([&](int layer, ActivationSite site, const float* x, int n_tokens, int width) {
        LayerActivations& L = data.layers[static_cast<size_t>(layer)];
        switch (site) {
            case ActivationSite::AttnInput: sampler.keep(x, n_tokens, width, L.attn_in); break;
            case ActivationSite::AttnOutput: sampler.keep(x, n_tokens, width, L.attn_out); break;
            case ActivationSite::FfnInput: sampler.keep(x, n_tokens, width, L.ffn_in); break;
            case ActivationSite::DownInput: sampler.keep(x, n_tokens, width, L.down_in); break;
        }
    });

    std::vector<float> no_logits;
    for (int seq0 = 0; seq0 < n; seq0 += seq_len) {
        const int seq_end = std::min(n, seq0 + seq_len);
        for (int start = seq0; start < seq_end; start += chunk) {
            const int len = std::min(chunk, seq_end - start);
            ForwardBatch b;
            b.tokens.assign(tokens.begin() + start, tokens.begin() + start + len);
            for (int i = 0; i < len; ++i) {
                b.positions.push_back(start - seq0 + i);  // each sequence from position 0
                b.token_seq.push_back(0);
            }
            b.n_seqs = 1;
            b.max_blocks_per_seq = n_blocks;
            for (int i = 0; i < n_blocks; ++i) b.block_tables.push_back(i);
            sampler.chunk_start = start;
            KVS_RETURN_IF_ERROR(
                options.progress.check("calibration at token " + std::to_string(start) + " of " + std::to_string(n)));
            Status st = forward.forward(b, &no_logits);
            if (!st) return R::error("calibration: " + st.message());
            options.progress.report(options.stage + " on " + std::to_string(n) + " tokens", start + len, n);
        }
    }
    return data;
}

namespace {
// What keeps SequentialCalibration's model alive: the reference and the quantized layers.
struct SequentialStorage {
    std::shared_ptr<const Model> reference;
    std::shared_ptr<void> quantized;
};
}  // namespace

SequentialCalibration::SequentialCalibration(std::shared_ptr<const Model> reference, std::shared_ptr<void> keep_alive)
    : m_current(std::make_shared<Model>(*reference)) {
    m_current->storage = std::make_shared<SequentialStorage>(SequentialStorage{reference, std::move(keep_alive)});
}

Result<CalibrationData> SequentialCalibration::collect(int layer, const std::vector<int32_t>& tokens,
                                                       const CalibrationOptions& options) const {
    if (layer < 0 || layer >= m_current->config.n_layer)
        return Result<CalibrationData>::error("calibration: layer " + std::to_string(layer) + " out of range (" +
                                              std::to_string(m_current->config.n_layer) + " layers)");
    auto upto = std::make_shared<Model>(*m_current);  // layers 0..layer only
    upto->config.n_layer = layer + 1;
    upto->layers.resize(size_t(layer + 1));
    return collect_activations(std::move(upto), tokens, options);
}

void SequentialCalibration::set_layer(int layer, const LayerWeights& quantized) {
    m_current->layers.at(size_t(layer)) = quantized;
}

std::vector<int32_t> sample_calibration_tokens(const std::vector<int32_t>& text, int n, int seq_len, uint32_t seed) {
    if (n <= 0 || int64_t(text.size()) <= n) return text;
    if (seed == 0) return std::vector<int32_t>(text.begin(), text.begin() + n);
    seq_len = seq_len > 0 ? std::min(seq_len, n) : n;
    std::mt19937 rng(seed);
    std::vector<int32_t> out;
    while (int(out.size()) < n) {
        const int len = std::min(seq_len, n - int(out.size()));
        std::uniform_int_distribution<int64_t> start(0, int64_t(text.size()) - len);
        const int64_t s0 = start(rng);
        out.insert(out.end(), text.begin() + s0, text.begin() + s0 + len);
    }
    return out;
}

Result<std::vector<int32_t>> tokenize_text_file(const Model& model, const std::string& path, int max_tokens) {
    using R = Result<std::vector<int32_t>>;
    std::ifstream in(path, std::ios::binary);
    if (!in) return R::error("cannot read the calibration text '" + path + "'");
    std::ostringstream text;
    text << in.rdbuf();
    auto tok = Tokenizer::create(model.vocab);
    if (!tok) return R::error("calibration text '" + path + "': " + tok.message());
    std::vector<int32_t> ids = tok->encode(text.str(), /*add_special=*/true, /*parse_special=*/false);
    if (ids.empty()) return R::error("calibration text '" + path + "' is empty");
    if (max_tokens > 0 && static_cast<int>(ids.size()) > max_tokens) ids.resize(static_cast<size_t>(max_tokens));
    return ids;
}

}  // namespace kvs

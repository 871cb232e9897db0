#pragma once
// Calibration for activation-aware quantization (AWQ): run calibration tokens through the
// reference model and keep, per layer, a bounded sample of the inputs of its linears.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/progress.h"
#include "engine/core/status.h"
#include "engine/model/model.h"

namespace kvs {

// One layer's linear inputs for the sampled token rows (row r of every buffer is the
// same token).
struct LayerActivations {
    std::vector<float> attn_in;   // [n_rows, n_embd]  attn-norm output: input of q/k/v
    std::vector<float> attn_out;  // [n_rows, n_head * head_dim] attention output: input of o
    std::vector<float> ffn_in;    // [n_rows, n_embd]  ffn-norm output: input of gate/up
    std::vector<float> down_in;   // [n_rows, n_ff]    SwiGLU output: input of down
};

struct CalibrationData {
    int n_rows = 0;                        // sampled token rows per buffer
    int n_tokens = 0;                      // tokens run through the model
    int seq_len = 0;                       // tokens per calibration sequence (the last may be shorter)
    std::vector<LayerActivations> layers;  // [n_layer]
};

struct CalibrationOptions {
    int max_rows = 1024;  // keep at most this many token rows (every k-th token)
    // The tokens are cut into independent sequences of seq_len tokens, each run from
    // position 0 (AutoAWQ calibrates on many samples, not one long text); 0: one sequence.
    int seq_len = 256;
    int n_threads = 2;  // CPU threads of the forward pass
    int chunk = 256;    // tokens per forward pass
    // Tokens at the start of the sequence run but not sampled (the first token is an
    // attention sink with activations orders of magnitude above the rest). 0 like AutoAWQ;
    // skipping it did not help AWQ on SmolLM2-135M.
    int skip_first = 0;
    // Hears each chunk run (stage: `stage` + " on N tokens"); cancelled: collect_activations
    // returns Progress::cancelled_status before the next chunk.
    Progress progress;
    std::string stage = "calibrating";
};

// Runs `tokens` through `model` as sequences of options.seq_len on the CPU backend and samples every
// ceil((n - skip_first) / max_rows)-th token's activations after the first skip_first. Errors: no tokens, a token
// outside the vocabulary, more tokens than the model's training context, cancellation.
Result<CalibrationData> collect_activations(std::shared_ptr<const Model> model, const std::vector<int32_t>& tokens,
                                            const CalibrationOptions& options = {});

// Sequential calibration (GPTQ's layer loop, AwqOptions::sequential): the reference model
// with each layer swapped for its quantized version once that is done, so that layer l
// calibrates on the outputs of the already-quantized layers 0..l-1 rather than the reference's.
class SequentialCalibration {
public:
    // reference: F32 linears; keep_alive: what the quantized layers' weights live in.
    SequentialCalibration(std::shared_ptr<const Model> reference, std::shared_ptr<void> keep_alive);
    // The activations of layers 0..layer (the layers after it are not run): data.layers has
    // layer + 1 entries. Errors: those of collect_activations, a layer out of range.
    Result<CalibrationData> collect(int layer, const std::vector<int32_t>& tokens,
                                    const CalibrationOptions& options) const;
    // From now on layer `layer` runs as `quantized` (whose weights keep_alive holds).
    void set_layer(int layer, const LayerWeights& quantized);

private:
    std::shared_ptr<Model> m_current;  // the reference with the finished layers swapped in
};

// n calibration tokens out of a tokenized text: seed 0 takes the first n; any other seed
// takes ceil(n / seq_len) windows of seq_len tokens (the last one shorter) at offsets drawn
// uniformly with std::mt19937(seed) (they may overlap, as GPTQ's and AutoAWQ's samplers
// draw them), so two seeds are two calibration sets of one text. Fewer than n text
// tokens: the whole text.
std::vector<int32_t> sample_calibration_tokens(const std::vector<int32_t>& text, int n, int seq_len, uint32_t seed);

// The default calibration text: the Apache-2.0 license every Debian system ships.
inline const char* default_calibration_text_path() { return "/usr/share/common-licenses/Apache-2.0"; }

// The first max_tokens tokens of a text file, encoded with the model's tokenizer (BOS
// first when the vocabulary asks for it). Errors name the file.
Result<std::vector<int32_t>> tokenize_text_file(const Model& model, const std::string& path, int max_tokens);

}  // namespace kvs

#include "app/cli/cli_options.h"

#include <algorithm>
#include <string>
#include <thread>

#include "engine/kv_cache/kv_tensors.h"
#include "kernels/cpu/cpu_features.h"

namespace kvs::app {

CLI::Validator simd_level_check() {
    // The kernels' own parser: one list of levels and one message ("this build has no
    // AVX-512 kernels") for the CLI and the backend factories.
    return CLI::Validator(
        [](std::string& v) {
            std::string error;
            return cpu::parse_simd(v, &error) ? std::string() : error;
        },
        "auto|avx2|scalar");
}

CLI::Validator thread_count_check() {
    const int hw = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    return CLI::Range(0, hw);
}

void add_cpu_options(CLI::App* c, RunnerOptions& r) {
    c->add_option("-t,--threads", r.n_threads, "CPU threads (0: one per core)")->check(thread_count_check());
    c->add_option("--backend", r.backend, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
    c->add_option("--simd", r.simd, "CPU kernels: auto, avx2, scalar")->check(simd_level_check());
}

void add_runner_options(CLI::App* c, RunnerOptions& r) {
    c->add_option("--ctx", r.n_ctx, "context size in tokens")->check(CLI::Range(1, kMaxCtx));
    c->add_option("--batch", r.n_batch, "most tokens per forward pass (prompt chunk)")->check(CLI::Range(1, kMaxBatch));
    add_cpu_options(c, r);
    c->add_option("--block-size", r.block_size, "KV block size in tokens (8, 16, 32)")
        ->check(CLI::IsMember({8, 16, 32}));
    c->add_option_function<std::string>(
         "--kv-type", [&r](const std::string& name) { r.kv_type = parse_kv_type(name).value(); },
         "KV cache elements: f16, or int8 (8-bit values with one fp16 scale per 32; about half the memory)")
        ->check(CLI::IsMember({"f16", "int8"}))
        ->default_str("f16");
}

void KvTierFlags::apply(EngineOptions& e) const {
    e.kv_cpu_tier_bytes = static_cast<int64_t>(cpu_mib * 1048576.0);
    e.kv_disk_bytes = static_cast<int64_t>(disk_mib * 1048576.0);
    e.kv_disk_dir = disk_dir;
}

void add_kv_tier_options(CLI::App* c, KvTierFlags& t) {
    c->add_option("--kv-cpu-mib", t.cpu_mib,
                  "KV tiers: keep prefix-cached blocks evicted from the KV pool in a CPU tier of this many MiB "
                  "(0: off), and load them back on a prefix hit")
        ->check(CLI::Range(0.0, 1048576.0));
    c->add_option("--kv-disk-mib", t.disk_mib,
                  "KV tiers: then on disk, up to this many MiB (0: off); kept across runs of the program")
        ->check(CLI::Range(0.0, 1048576.0));
    c->add_option("--kv-disk-dir", t.disk_dir,
                  "KV tiers: the disk store's folder (default ~/.cache/kvscope/kv; one subfolder per model, KV type "
                  "and block size)");
}

void add_sampling_options(CLI::App* c, SamplingParams& s) {
    c->add_option("-n,--max-tokens", s.max_tokens, "tokens to generate (-1: until end or context full)")
        ->check(CLI::Range(-1, kMaxTokens));
    c->add_option("--temp", s.temperature, "temperature (0: greedy)")->check(CLI::Range(0.0, 100.0));
    c->add_option("--top-k", s.top_k, "keep the k most likely tokens (0: off)")->check(CLI::Range(0, kMaxTokens));
    c->add_option("--top-p", s.top_p, "nucleus sampling mass (1: off)")->check(CLI::Range(0.0, 1.0));
    c->add_option("--min-p", s.min_p, "drop tokens under min-p x the top probability (0: off)")
        ->check(CLI::Range(0.0, 1.0));
    c->add_option("--repeat-penalty", s.repeat_penalty, "repetition penalty (1: off)")->check(CLI::Range(0.01, 100.0));
    c->add_option("--presence-penalty", s.presence_penalty, "presence penalty (0: off)")->check(CLI::Range(-2.0, 2.0));
    c->add_option("--frequency-penalty", s.frequency_penalty, "frequency penalty (0: off)")
        ->check(CLI::Range(-2.0, 2.0));
    c->add_option("--penalty-last-n", s.penalty_last_n, "tokens the penalties look back over (-1: all)")
        ->check(CLI::Range(-1, kMaxCtx));
    c->add_option("--no-repeat-ngram", s.no_repeat_ngram_size, "ban repeating n-grams of this size (0: off)")
        ->check(CLI::Range(0, 64));
    c->add_option("--seed", s.seed, "random seed");
    c->add_option("--stop", s.stop, "stop string (repeatable)");
    c->add_flag("--ignore-eos", s.ignore_eos, "keep generating past end-of-sequence tokens");
    c->add_flag("--watermark", s.watermark,
                "watermark the text: +2 on the logits of a green half of the vocabulary seeded by the previous token "
                "(TGI's scheme; kvscope watermark-detect finds it)");
    c->add_option("--min-new-tokens", s.min_new_tokens, "no end-of-sequence token before this many tokens")
        ->check(CLI::Range(0, kMaxTokens));
}

}  // namespace kvs::app

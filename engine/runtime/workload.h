#pragma once
// Benchmark workloads: a list of requests with arrival times, prompts of random token ids
// and output lengths, generated deterministically from a seed (same spec, same workload,
// on every platform: the random streams are mt19937_64 outputs turned into numbers by
// this file's own code, not by the implementation-defined std distributions).
//
// Kinds (defaults fit the default model, SmolLM2-135M, on a 2-core CPU):
//   mixed          n=64, all at t=0; prompt 16..512 and output 16..256 tokens, each drawn
//                  log-uniform (see below), so many short requests mix with a few long ones.
//                  The throughput workload: continuous vs static batching.
//   poisson        mixed lengths, Poisson arrivals at rate=1 request/s (exponential gaps).
//   shared-prefix  n=32, all at t=0; every prompt is the same 256-token "system prompt"
//                  followed by a unique tail of 16..64 tokens (uniform); output 16..128 (uniform).
//                  The prefix-caching workload.
//   uniform        n=64, all at t=0; prompt 16..512, output 16..256, uniform. With equal
//                  bounds (prompt=128,output=128) every request is the same size: the
//                  batch-size sweep.
//
// Lengths. prompt_min..prompt_max is the length of the part of each prompt that is its own;
// the whole prompt is shared_prefix_len + that. "Log-uniform" over [a, b]: L = floor(exp(U))
// with U uniform in [ln a, ln(b + 1)), so each doubling of length is about equally likely
// (16-31 as likely as 256-511): a heavy tail towards short requests, mean about
// (b - a) / ln(b / a) (87 output tokens for 16..256). Every kind can take prefix=N.
// Arrivals. rate_rps > 0 and finite: the first request arrives at t=0, then exponential
// gaps with mean 1/rate_rps. rate_rps 0 or inf: all at t=0.
// Token ids are uniform in [first_token_id, n_vocab), skipping the special tokens at the
// bottom of the vocabulary (SmolLM2: ids 0..16). Prompts are random ids, not text: pair
// the benchmark with ignore-EOS generation so output lengths are the ones drawn.
// Priorities: uniform in [0, n_priorities) (1 = everyone at priority 0).
// Independence: arrivals, lengths, token ids and priorities come from four streams derived
// from the seed, so changing the rate does not change the prompts, and so on.
//
// Spec strings (parse_workload_spec):  kind[:key=value[,key=value...]]
//   mixed                    mixed:n=64,rate=8          shared-prefix:n=32,prefix=256
//   uniform:prompt=128,output=128                       poisson:rate=2,seed=7
// keys: n, rate (number, or inf), prompt / output (N or A..B, setting both bounds),
// prompt_min, prompt_max, output_min, output_max, prefix, vocab, first_token, seed, priorities.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/status.h"

namespace kvs {

struct WorkloadRequest {
    double arrival_s = 0;         // seconds after the benchmark starts
    std::vector<int32_t> prompt;  // [shared_prefix_len + own length] token ids
    int max_tokens = 0;           // output length to generate
    int priority = 0;             // lower = more urgent (the scheduler's convention)
};

struct WorkloadSpec {
    std::string kind = "mixed";  // "mixed", "poisson", "shared-prefix", "uniform"
    int n_requests = 64;
    double rate_rps = 0;                    // Poisson arrival rate; 0 or inf = all at t=0
    int prompt_min = 16, prompt_max = 512;  // each prompt's own tokens (after the shared prefix)
    int output_min = 16, output_max = 256;
    int shared_prefix_len = 0;    // tokens every prompt starts with
    int n_vocab = 49152;          // SmolLM2's vocabulary
    int32_t first_token_id = 32;  // lowest id drawn (skips special tokens)
    uint64_t seed = 1;
    int n_priorities = 1;  // priorities drawn in [0, n_priorities)
};

// The defaults of a kind (see the table above); error for an unknown kind.
Result<WorkloadSpec> default_workload_spec(const std::string& kind);

// Parses "kind[:key=value,...]": the kind's defaults, then the keys in order, then
// validate_workload_spec. Errors name the key and the text that was wrong.
Result<WorkloadSpec> parse_workload_spec(const std::string& text);

// The canonical spec string with every key: parse_workload_spec of it gives the same spec.
std::string workload_spec_string(const WorkloadSpec& spec);

// Checks ranges: n >= 1, rate >= 0 (not NaN), 1 <= min <= max for prompt and output,
// prefix >= 0, 0 <= first_token < vocab, priorities >= 1, a known kind.
Status validate_workload_spec(const WorkloadSpec& spec);

// The requests, sorted by arrival (all arrival_s = 0 when every request comes at once).
Result<std::vector<WorkloadRequest>> make_workload(const WorkloadSpec& spec);

}  // namespace kvs

#pragma once
// Options and entry points of the headless subcommands. Each returns the process exit
// code: 0 on success, 1 when the input was bad (the message went to stderr).
#include <string>
#include <vector>

#include <memory>

#include "engine/model/model.h"
#include "engine/runtime/sequence_runner.h"
#include "engine/sampling/sampling_params.h"

namespace kvs::app {

struct GenerateOptions {
    std::string model;
    std::string prompt;
    std::string prompt_file;
    std::string system;
    bool chat = false;
    bool quiet_stats = false;
    SamplingParams sampling;
    RunnerOptions runner;
};
int cmd_generate(const GenerateOptions& o);

struct InspectOptions {
    std::string model;
    int ctx = 0;     // 0: the model's training context
    int batch = 1;
    bool tensors = false;
    bool json = false;
};
int cmd_inspect(const InspectOptions& o);

struct BenchOptions {
    std::string model;
    int n_prompt = 512;
    int n_gen = 128;
    int repetitions = 5;
    bool json = false;
    std::string json_out;
    RunnerOptions runner;
};
int cmd_bench(const BenchOptions& o);

// Resolves and loads a model by name or path; prints the error and returns null when
// it cannot. *load_ms gets the load time.
std::shared_ptr<Model> load_model_or_report(const std::string& name_or_path, double* load_ms);

}  // namespace kvs::app

#pragma once
// kvscope roofline: this machine's roof (peak GFLOP/s of the best matmul kernel, streaming
// memory bandwidth, the ridge; engine/runtime/machine_roof.h, cached per machine) and every
// op group of a prefill step and of decode steps at each batch size on it: FLOPs, bytes,
// arithmetic intensity, achieved GFLOP/s and the share of the attainable roof
// (engine/model/op_costs.h, the engine's op timer).
#include <string>

#include "engine/runtime/session.h"

namespace CLI {
class App;
}

namespace kvs::app {

struct RooflineOptions {
    std::string model;
    std::string batches = "1,2,4,8,16,32,64";  // decode batch sizes
    int prompt = 256;                          // prompt tokens of each request (its prefill step)
    int gen = 8;                               // tokens each request generates
    bool remeasure = false;                    // measure the roof again instead of the cached one
    bool roof_only = false;
    bool json = false;
    std::string json_out;
    RunnerOptions runner;  // threads, SIMD level, KV type, context
};

CLI::App* add_roofline_command(CLI::App& app, RooflineOptions& o);
int cmd_roofline(const RooflineOptions& o);

}  // namespace kvs::app

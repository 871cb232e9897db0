#pragma once
// Whether a backend can run every weight matrix of a model: checked once when an engine
// or sequence runner is made, so a model in a format the backend has no kernels for (or
// with GPTQ act-order's permuted columns on a backend that cannot gather its input by them)
// is a clear error, not a failure in the middle of a forward pass.
#include "engine/core/status.h"
#include "engine/model/model.h"
#include "kernels/backend.h"

namespace kvs {

// Ok, or an error naming the backend, the weight type and the first tensor of that type.
Status check_weight_support(const Model& model, const Backend& backend);

}  // namespace kvs

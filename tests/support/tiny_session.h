#pragma once
// A Session (the engine's front door) on a tiny model the test writes itself: the tiny
// GGUF of tiny_model.h written to `path`, then opened the way the window and the CLI open
// a model.
#include <memory>
#include <string>

#include "engine/runtime/session.h"
#include "tests/support/tiny_model.h"

namespace kvs::test {

Result<std::shared_ptr<Session>> open_tiny_session(const std::string& path, const TinyModelSpec& spec = {},
                                                   const SessionOptions& opt = {});

}  // namespace kvs::test

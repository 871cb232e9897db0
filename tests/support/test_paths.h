#pragma once
// Where tests find fixtures, write their output, and find the installed default model.
#include <string>

namespace kvs::test {

inline std::string fixture_path(const std::string& name) { return std::string(KVS_FIXTURE_DIR) + "/" + name; }
inline std::string output_path(const std::string& name) { return std::string(KVS_TEST_OUTPUT_DIR) + "/" + name; }
// A script of tests/tools/ (fixture makers), e.g. "make_awq_checkpoint.py".
inline std::string tool_path(const std::string& name) { return std::string(KVS_FIXTURE_DIR) + "/../tools/" + name; }
inline std::string kvscope_exe() { return KVS_KVSCOPE_EXE; }
// The project's source tree (the folder above tests/), for tests that read the sources.
inline std::string source_root() { return std::string(KVS_FIXTURE_DIR) + "/../.."; }
// Path of the installed default model (SmolLM2-135M-Instruct Q4_1), or "" when it is not installed.
std::string default_model_path();
// Path of the installed Gemma 3 270M (installer/fetch_model.sh gemma3-270m), or "".
std::string gemma3_model_path();
// The Python of the project's venv (installer/setup.sh: $XDG_DATA_HOME/kvscope/venv), else
// "python3" on PATH; for tests that make fixtures with numpy / safetensors.
std::string find_python();

}  // namespace kvs::test

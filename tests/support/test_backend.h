#pragma once
// The backend the model tests run on: "cpu" unless KVS_TEST_BACKEND names another (the
// CUDA runs of the same tests on a GPU machine set it to "cuda").
#include <string>

namespace kvs::test {

std::string test_backend();

}  // namespace kvs::test

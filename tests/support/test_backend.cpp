#include "tests/support/test_backend.h"

#include <cstdlib>

namespace kvs::test {

std::string test_backend() {
    const char* b = std::getenv("KVS_TEST_BACKEND");
    return b && *b ? b : "cpu";
}

}  // namespace kvs::test

#include "tests/support/tiny_session.h"

namespace kvs::test {

Result<std::shared_ptr<Session>> open_tiny_session(const std::string& path, const TinyModelSpec& spec,
                                                   const SessionOptions& opt) {
    KVS_RETURN_IF_ERROR(write_tiny_gguf(path, spec));
    return Session::open(path, opt);
}

}  // namespace kvs::test

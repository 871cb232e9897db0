#pragma once
// A loopback TCP port that nothing listens on at this moment: bound to 127.0.0.1 with port
// 0, read back, closed. For tests that start a server on it, or that want a refused
// connection. 0 when no socket could be bound.
namespace kvs::test {

int closed_loopback_port();

}  // namespace kvs::test

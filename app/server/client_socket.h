#pragma once
// Whether the client of a request still being answered has hung up. cpp-httplib 0.11 (Debian
// 12's) gives a handler neither its socket nor Request::is_connection_closed (added in later
// versions), and its per-connection entry point is private. The handler knows the
// connection's address pair (Request::local_addr / local_port / remote_addr / remote_port),
// which names exactly one TCP socket of this process: find_client_socket looks it up among
// the process's open descriptors (getsockname / getpeername), and peer_closed polls it
// without reading: an orderly close (FIN, POLLRDHUP), a reset or an error. The descriptor
// stays valid while the handler runs (the library closes it after the handler returns).
#include <string>

namespace kvs::server {

// The descriptor of the TCP socket with this local and remote address and port; -1 when none.
int find_client_socket(const std::string& local_addr, int local_port, const std::string& remote_addr,
                       int remote_port);

// True when the peer of fd has closed or reset the connection (bytes it sent and nobody read
// yet do not count as a close).
bool peer_closed(int fd);

}  // namespace kvs::server

#include "app/server/client_socket.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>

namespace kvs::server {

namespace {

// The numeric address and port of a socket address (IPv4, IPv6); false for other families.
bool address_of(const sockaddr_storage& ss, std::string* addr, int* port) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (ss.ss_family == AF_INET) {
        const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
        if (!inet_ntop(AF_INET, &a.sin_addr, buf, sizeof(buf))) return false;
        *port = ntohs(a.sin_port);
    } else if (ss.ss_family == AF_INET6) {
        const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
        if (!inet_ntop(AF_INET6, &a.sin6_addr, buf, sizeof(buf))) return false;
        *port = ntohs(a.sin6_port);
    } else {
        return false;
    }
    *addr = buf;
    return true;
}

bool same_address(const std::string& seen, const std::string& want) {
    if (seen == want) return true;
    const std::string mapped = "::ffff:";  // an IPv4 client of a dual-stack socket
    return seen.rfind(mapped, 0) == 0 && seen.substr(mapped.size()) == want;
}

}  // namespace

int find_client_socket(const std::string& local_addr, int local_port, const std::string& remote_addr,
                       int remote_port) {
    DIR* dir = opendir("/proc/self/fd");
    if (!dir) return -1;
    int found = -1;
    while (dirent* e = readdir(dir)) {
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
        sockaddr_storage ss{};
        socklen_t len = sizeof(ss);
        std::string addr;
        int port = 0;
        if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&ss), &len) != 0) continue;
        if (!address_of(ss, &addr, &port) || port != local_port || !same_address(addr, local_addr)) continue;
        len = sizeof(ss);
        if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&ss), &len) != 0) continue;
        if (!address_of(ss, &addr, &port) || port != remote_port || !same_address(addr, remote_addr)) continue;
        found = static_cast<int>(fd);
        break;
    }
    closedir(dir);
    return found;
}

bool peer_closed(int fd) {
    if (fd < 0) return false;
    pollfd p{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    if (p.revents & POLLIN) {
        char c;
        return ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
    }
    return false;
}

}  // namespace kvs::server

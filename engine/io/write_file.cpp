#include "io/write_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "k3/error.h"

namespace k3::io {

namespace {

std::string reason(const std::filesystem::path& path, const char* what) {
    return path.string() + ": " + what + ": " + std::strerror(errno);
}

// write(2) until every byte is out (continuing after EINTR and short writes).
bool write_all(int fd, const uint8_t* p, size_t n) {
    while (n > 0) {
        const ssize_t w = ::write(fd, p, std::min<size_t>(n, size_t(1) << 30));
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        p += w;
        n -= size_t(w);
    }
    return true;
}

}  // namespace

void write_file_atomically(const std::filesystem::path& path, std::span<const std::span<const uint8_t>> parts) {
    std::filesystem::path tmp = path;
    tmp += ".tmp-" + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(ErrorKind::Io, reason(tmp, "cannot create"));
    bool ok = true;
    for (std::span<const uint8_t> part : parts)
        if (ok && !write_all(fd, part.data(), part.size())) ok = false;
    std::string failure = ok ? "" : reason(tmp, "write failed");
    if (::close(fd) != 0 && ok) {
        ok = false;
        failure = reason(tmp, "close failed");
    }
    if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
        ok = false;
        failure = reason(path, "rename failed");
    }
    if (!ok) {
        ::unlink(tmp.c_str());
        throw Error(ErrorKind::Io, failure);
    }
}

}  // namespace k3::io

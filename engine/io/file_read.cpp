// ReadFile (file_read.h).
#include "io/file_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "k3/error.h"

namespace k3 {

ReadFile::ReadFile(const std::filesystem::path& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw Error(ErrorKind::Io, "cannot open " + path.string() + ": " + std::strerror(errno));
}

ReadFile::~ReadFile() {
    if (fd_ >= 0) ::close(fd_);
}

void ReadFile::read_exact(void* dst, int64_t n, int64_t offset, const std::string& what) const {
    auto* p = static_cast<uint8_t*>(dst);
    int64_t done = 0;
    while (done < n) {
        const ssize_t r = ::pread(fd_, p + done, size_t(n - done), off_t(offset + done));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            throw Error(ErrorKind::Io, "reading " + what + " from " + path_.string() + " at offset " +
                                           std::to_string(offset + done) + ": " + std::strerror(errno));
        if (r == 0)
            throw Error(ErrorKind::Io, "short read of " + what + " from " + path_.string() + ": got " +
                                           std::to_string(done) + " of " + std::to_string(n) +
                                           " bytes at offset " + std::to_string(offset));
        done += r;
    }
}

}  // namespace k3

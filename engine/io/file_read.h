// Whole-range reads of checkpoint bytes at load time: pread in a loop (short reads and EINTR),
// failures thrown as k3::Error naming the file, offset and what was being read.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

namespace k3 {

// An open read-only file descriptor (RAII).
class ReadFile {
public:
    explicit ReadFile(const std::filesystem::path& path);
    ~ReadFile();
    ReadFile(const ReadFile&) = delete;
    ReadFile& operator=(const ReadFile&) = delete;

    // Reads exactly n bytes at `offset` into dst; throws k3::Error(Io) on failure or EOF.
    void read_exact(void* dst, int64_t n, int64_t offset, const std::string& what) const;
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
    int fd_ = -1;
};

}  // namespace k3

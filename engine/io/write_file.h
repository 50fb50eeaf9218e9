// Writing a whole file so that readers never see half of it: the bytes go to PATH.tmp-PID, then
// a rename puts them in place (a rename within one directory is atomic), so a crash mid-write
// leaves at most a stray .tmp file and never a truncated PATH. The read side is io::File.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>

namespace k3::io {

// Writes the concatenation of `parts` as `path`. Throws k3::Error(Io) naming the path on any
// failure (the temporary file is removed).
void write_file_atomically(const std::filesystem::path& path, std::span<const std::span<const uint8_t>> parts);

}  // namespace k3::io

// Builds safetensors files byte by byte for the loader tests: tensors are appended back to
// back, and the header JSON can be edited (or replaced) before the file is written, so every
// refusal can be provoked on purpose.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/scratch.h"

namespace k3::test {

inline int dtype_bytes(const std::string& dt) {
    if (dt == "F32") return 4;
    if (dt == "BF16" || dt == "F16") return 2;
    return 1;
}

class ShardBuilder {
public:
    // Appends a tensor right after the previous one; its bytes are `fill`.
    ShardBuilder& add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                      uint8_t fill = 0) {
        int64_t n = dtype_bytes(dtype);
        for (int64_t d : shape) n *= d;
        header[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {data_size, data_size + n}}};
        data.resize(size_t(data_size + n), char(fill));
        data_size += n;
        return *this;
    }

    // The whole file: 8-byte little-endian length, header JSON, data.
    std::string bytes() const { return bytes_with_header(header.dump()); }

    std::string bytes_with_header(const std::string& json_text) const {
        std::string out(8, '\0');
        uint64_t n = json_text.size();
        for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
        return out + json_text + data;
    }

    void write(const std::filesystem::path& path) const { write_file(path, bytes()); }

    static void write_file(const std::filesystem::path& path, const std::string& content) {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(content.data(), std::streamsize(content.size()));
    }

    nlohmann::json header = nlohmann::json::object();
    std::string data;
    int64_t data_size = 0;
};

}  // namespace k3::test

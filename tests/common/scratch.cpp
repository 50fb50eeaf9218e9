#include "common/scratch.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace k3::test {

namespace fs = std::filesystem;

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v && *v ? v : fallback;
}

std::string env_or_throw(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) throw std::runtime_error(std::string(name) + " is not set (run the test through ctest)");
    return v;
}

fs::path test_tmp_root() { return env_or("K3_TEST_TMP", "/tmp/k3-test"); }

namespace {
bool g_scratch_used = false;
}

fs::path process_scratch_root() {
    const fs::path root = test_tmp_root() / ("proc-" + std::to_string(::getpid()));
    if (!g_scratch_used) {
        fs::remove_all(root);  // a stale one from an earlier process that had the same pid
        fs::create_directories(root);
        g_scratch_used = true;
    }
    return root;
}

fs::path scratch_dir(const std::string& name) {
    const fs::path dir = process_scratch_root() / name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

fs::path scratch_path(const std::string& name) {
    const fs::path path = process_scratch_root() / name;
    fs::remove_all(path);
    return path;
}

void finish_scratch(bool keep) {
    if (!g_scratch_used) return;
    const fs::path root = test_tmp_root() / ("proc-" + std::to_string(::getpid()));
    if (keep || env_or("K3_KEEP_TEST_TMP", "0") == "1") {
        std::fprintf(stderr, "test scratch kept: %s\n", root.c_str());
        return;
    }
    std::error_code ec;
    fs::remove_all(root, ec);
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path.string());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_file(const fs::path& path, const std::string& bytes) {
    if (path.has_parent_path()) fs::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace k3::test

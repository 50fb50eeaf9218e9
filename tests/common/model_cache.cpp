#include "common/model_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "common/process.h"
#include "common/scratch.h"

namespace k3::test {

namespace fs = std::filesystem;

namespace {

// FNV-1a over 8-byte words, then a final mix: fast enough to check a few hundred MB per test
// process, and any changed, added, removed or truncated file changes it.
struct Hasher {
    uint64_t h = 0xcbf29ce484222325ull;
    void word(uint64_t w) { h = (h ^ w) * 0x100000001b3ull; }
    void bytes(const char* p, size_t n) {
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            uint64_t w;
            std::copy(p + i, p + i + 8, reinterpret_cast<char*>(&w));
            word(w);
        }
        uint64_t tail = 0;
        std::copy(p + i, p + n, reinterpret_cast<char*>(&tail));
        word(tail ^ (uint64_t(n - i) << 56));
    }
    uint64_t done() const {
        uint64_t x = h;
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdull;
        return x ^ (x >> 33);
    }
};

// Who wrote the model: the writer's (k3-test-make-model, or k3serve) size and modification time.
std::string generator_identity(const std::string& bin) {
    std::error_code ec;
    const auto size = fs::file_size(bin, ec);
    const auto mtime = fs::last_write_time(bin, ec).time_since_epoch().count();
    return bin + " " + std::to_string(size) + " " + std::to_string(mtime);
}

std::string manifest_line(const fs::path& dir, const std::string& generator) {
    return generator + " " + std::to_string(hash_directory(dir)) + "\n";
}

// An exclusive flock held for the scope.
class FileLock {
public:
    explicit FileLock(const fs::path& path) {
        fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) throw std::runtime_error("cannot lock " + path.string());
    }
    ~FileLock() { ::close(fd_); }
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;

private:
    int fd_ = -1;
};

}  // namespace

uint64_t hash_directory(const fs::path& dir) {
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    Hasher hasher;
    std::vector<char> buf(1 << 20);
    for (const auto& f : files) {
        const std::string rel = fs::relative(f, dir).string();
        hasher.bytes(rel.data(), rel.size());
        std::ifstream in(f, std::ios::binary);
        uint64_t size = 0;
        while (in) {
            in.read(buf.data(), std::streamsize(buf.size()));
            const size_t n = size_t(in.gcount());
            hasher.bytes(buf.data(), n);
            size += n;
        }
        hasher.word(size);
    }
    return hasher.done();
}

std::string cached_model(const std::string& preset, uint64_t seed) {
    const fs::path cache = test_tmp_root() / "models";
    fs::create_directories(cache);
    const std::string key = preset + "-" + std::to_string(seed);
    const fs::path dir = cache / key, manifest = cache / (key + ".manifest");
    // The model writer: the tests' k3-test-make-model, or (a bench run by hand) k3serve's make-model.
    const bool writer = !env_or("K3_MAKE_MODEL_BIN", "").empty();
    const std::string bin = writer ? env_or_throw("K3_MAKE_MODEL_BIN") : env_or_throw("K3SERVE_BIN");
    const std::string generator = generator_identity(bin);

    FileLock lock(cache / (key + ".lock"));
    if (fs::exists(dir) && fs::exists(manifest)) {
        if (read_file(manifest) == manifest_line(dir, generator)) return dir.string();
        std::fprintf(stderr, "cached model %s does not match its manifest: writing it again\n", dir.c_str());
    }
    fs::remove(manifest);
    fs::remove_all(dir);
    const ProcessResult r = run_command(quoted(bin) + (writer ? " " : " make-model ") + quoted(dir.string()) +
                                        " --preset " + preset + " --seed " + std::to_string(seed));
    if (r.exit_code != 0) throw std::runtime_error("make-model " + key + " failed:\n" + r.output);
    write_file(manifest, manifest_line(dir, generator));
    return dir.string();
}

}  // namespace k3::test

#include "store/shard_readahead.h"

#include <fcntl.h>
#include <unistd.h>

#include <system_error>

namespace k3 {

ShardReadahead::ShardReadahead(const std::filesystem::path& model_dir) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(model_dir, ec)) {
        if (entry.path().extension() != ".safetensors") continue;
        threads_.emplace_back([path = entry.path()] {
            const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
            if (fd < 0) return;
            posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
            ::close(fd);
        });
    }
}

ShardReadahead::~ShardReadahead() {
    for (auto& t : threads_) t.join();
}

}  // namespace k3

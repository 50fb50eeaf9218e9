// Reading a resident checkpoint's shards into the page cache while the checkpoint is still being
// opened (parsing k3-mini's headers and index takes 0.6 s, a tenth of its load): one thread per
// shard asks the kernel to read the whole file ahead (POSIX_FADV_WILLNEED), so the resident
// store's span loader (span_loader.h) later finds the pages there. Only for a load that reads
// every byte anyway in file order (everything resident, no background loading); joined when it
// goes away. Best effort: a failure here only costs the overlap.
#pragma once
#include <filesystem>
#include <thread>
#include <vector>

namespace k3 {

class ShardReadahead {
public:
    explicit ShardReadahead(const std::filesystem::path& model_dir);
    ~ShardReadahead();
    ShardReadahead(const ShardReadahead&) = delete;
    ShardReadahead& operator=(const ShardReadahead&) = delete;

private:
    std::vector<std::thread> threads_;
};

}  // namespace k3

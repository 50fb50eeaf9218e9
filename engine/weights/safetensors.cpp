// safetensors headers and the tensor directory (docs/model.md "Checkpoint files"). Everything here
// treats the files as untrusted: the header length is bounded before anything is allocated, the
// JSON is parsed strictly (util/strict_json.h), every number is range-checked before it is used in
// arithmetic, and each entry must lie inside the file without overlapping another. The directory
// then checks the shards against each other and against model.safetensors.index.json. All failures
// are k3::Error(ErrorKind::Checkpoint) naming the file and tensor, with expected vs actual.
#include "weights/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <nlohmann/json.hpp>

#include "k3/error.h"
#include "util/strict_json.h"

namespace k3 {

namespace {

using json = nlohmann::json;

// Caps how many problems one message lists; the rest are counted.
constexpr size_t kMaxListedProblems = 30;

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorKind::Checkpoint, message); }

bool parse_dtype(const std::string& s, DType* out) {
    static const std::pair<const char*, DType> kKnown[] = {
        {"BF16", DType::BF16}, {"F16", DType::F16}, {"F32", DType::F32}, {"U8", DType::U8}};
    for (const auto& [name, dt] : kKnown)
        if (s == name) {
            *out = dt;
            return true;
        }
    return false;
}

std::string shown_name(const std::string& name) {
    return name.size() > 200 ? name.substr(0, 200) + "..." : name;
}

// A non-negative integer that fits in int64 (JSON may hold negatives, floats or huge values).
bool as_size(const json& v, int64_t* out) {
    if (v.is_number_unsigned()) {
        if (v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) return false;
        *out = int64_t(v.get<uint64_t>());
        return true;
    }
    if (v.is_number_integer() && v.get<int64_t>() >= 0) {
        *out = v.get<int64_t>();
        return true;
    }
    return false;
}

// Reads exactly n bytes at offset; false on error or end of file.
bool pread_all(int fd, void* dst, size_t n, int64_t offset) {
    auto* p = static_cast<uint8_t*>(dst);
    while (n > 0) {
        ssize_t got = ::pread(fd, p, n, offset);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return false;
        p += got;
        n -= size_t(got);
        offset += got;
    }
    return true;
}

class Fd {
public:
    explicit Fd(const std::filesystem::path& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return fd_; }

private:
    int fd_;
};

// Reads and parses one shard's header (only the header bytes are read, never the data).
std::vector<TensorInfo> read_shard_header(const std::filesystem::path& path, int shard_index, ShardInfo* info) {
    const std::string file = path.filename().string();
    Fd fd(path);
    if (fd.get() < 0) refuse(file + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) refuse(file + ": cannot stat: " + std::strerror(errno));
    const int64_t file_size = st.st_size;
    uint8_t len_bytes[8];
    if (file_size < 8 || !pread_all(fd.get(), len_bytes, 8, 0))
        refuse(file + ": " + std::to_string(file_size) +
               " bytes, shorter than the 8-byte header length (truncated or not a safetensors file)");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
    // The bound is checked before allocating anything of size n.
    if (n > uint64_t(kMaxSafetensorsHeader))
        refuse(file + ": header length " + std::to_string(n) + " bytes exceeds the limit of " +
               std::to_string(kMaxSafetensorsHeader) + " (corrupt header length or not a safetensors file)");
    if (int64_t(n) > file_size - 8)
        refuse(file + ": header says its JSON is " + std::to_string(n) + " bytes but the file has only " +
               std::to_string(file_size - 8) + " after the length (truncated download?)");
    std::string bytes(8 + n, '\0');
    std::memcpy(bytes.data(), len_bytes, 8);
    if (!pread_all(fd.get(), bytes.data() + 8, n, 8)) refuse(file + ": read of the header failed");
    info->path = path;
    info->file_size = file_size;
    return parse_safetensors_header(bytes, file_size, shard_index, file, &info->data_start);
}

}  // namespace

std::vector<TensorInfo> parse_safetensors_header(std::string_view bytes, int64_t file_size, int shard_index,
                                                 const std::string& file_name, int64_t* data_start) {
    const std::string& file = file_name;
    if (bytes.size() < 8 || file_size < 8)
        refuse(file + ": " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
    if (n > uint64_t(kMaxSafetensorsHeader))
        refuse(file + ": header length " + std::to_string(n) + " bytes exceeds the limit of " +
               std::to_string(kMaxSafetensorsHeader));
    if (int64_t(n) > file_size - 8)
        refuse(file + ": header says its JSON is " + std::to_string(n) + " bytes but the file has only " +
               std::to_string(file_size - 8) + " after the length (truncated download?)");
    if (n > bytes.size() - 8)
        refuse(file + ": only " + std::to_string(bytes.size() - 8) + " of the header's " + std::to_string(n) +
               " bytes were given");
    if (n < 2) refuse(file + ": header JSON is " + std::to_string(n) + " bytes, too short to be an object");
    const int64_t start = 8 + int64_t(n);
    if (data_start) *data_start = start;

    json header = parse_strict_json(bytes.substr(8, n), file + ": header", ErrorKind::Checkpoint);
    if (!header.is_object()) refuse(file + ": header is not a JSON object");

    const int64_t data_size = file_size - start;
    std::vector<TensorInfo> out;
    out.reserve(header.size());
    std::unique_ptr<TensorInfo> first_cut;
    size_t n_cut = 0;
    for (auto it = header.begin(); it != header.end(); ++it) {
        const std::string& name = it.key();
        if (name == "__metadata__") {
            if (!it->is_object()) refuse(file + ": __metadata__ is not an object");
            continue;
        }
        const std::string where = file + ": tensor " + shown_name(name);
        if (name.empty()) refuse(file + ": a tensor has an empty name");
        const json& e = *it;
        if (!e.is_object()) refuse(where + ": entry is not an object");
        auto dt = e.find("dtype");
        auto sh = e.find("shape");
        auto off = e.find("data_offsets");
        if (dt == e.end() || sh == e.end() || off == e.end())
            refuse(where + ": entry needs dtype, shape and data_offsets");
        TensorInfo t;
        t.name = name;
        t.shard = shard_index;
        if (!dt->is_string() || !parse_dtype(dt->get<std::string>(), &t.dtype))
            refuse(where + ": dtype " + dt->dump() + " is not one of BF16, F16, F32, U8");
        if (!sh->is_array() || sh->size() > 8) refuse(where + ": shape " + sh->dump() + " is not a list of up to 8 sizes");
        // numel with overflow check: every product stays below 2^62.
        int64_t numel = 1;
        for (const json& d : *sh) {
            int64_t v = 0;
            if (!as_size(d, &v)) refuse(where + ": shape " + sh->dump() + " holds a non-size");
            if (v != 0 && numel > (int64_t(1) << 62) / v) refuse(where + ": shape " + sh->dump() + " is too large");
            numel *= v;
            t.shape.push_back(v);
        }
        int64_t begin = 0, end = 0;
        if (!off->is_array() || off->size() != 2 || !as_size((*off)[0], &begin) || !as_size((*off)[1], &end))
            refuse(where + ": data_offsets " + off->dump() + " is not a pair of byte offsets");
        if (end < begin) refuse(where + ": data_offsets " + off->dump() + " end before they begin");
        t.nbytes = numel * dtype_size(t.dtype);
        if (end - begin != t.nbytes)
            refuse(where + ": " + dtype_name(t.dtype) + " " + shape_string(t.shape) + " needs " + std::to_string(t.nbytes) +
                   " bytes but data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] span " +
                   std::to_string(end - begin));
        t.offset = start + begin;
        // Past the end of the file: keep going, so the message can name the FIRST tensor the
        // truncation cut (JSON order is not file order) and count the rest.
        if (end > data_size) {
            if (!first_cut || t.offset < first_cut->offset) first_cut = std::make_unique<TensorInfo>(t);
            ++n_cut;
            continue;
        }
        out.push_back(std::move(t));
    }
    if (first_cut)
        refuse(file + ": tensor " + shown_name(first_cut->name) + ": data ends at byte " +
               std::to_string(first_cut->offset + first_cut->nbytes) + " but the file is only " +
               std::to_string(file_size) + " bytes (truncated download?)" +
               (n_cut > 1 ? "; " + std::to_string(n_cut - 1) + " later tensors are cut off too" : std::string()));

    // Overlaps: sort by start; every non-empty tensor must begin at or after the previous end.
    std::vector<const TensorInfo*> by_offset;
    for (const auto& t : out)
        if (t.nbytes > 0) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
        const TensorInfo& a = *by_offset[i - 1];
        const TensorInfo& b = *by_offset[i];
        if (b.offset < a.offset + a.nbytes)
            refuse(file + ": tensor " + shown_name(b.name) + " (bytes " + std::to_string(b.offset) + ".." +
                   std::to_string(b.offset + b.nbytes) + ") overlaps tensor " + shown_name(a.name) + " (bytes " +
                   std::to_string(a.offset) + ".." + std::to_string(a.offset + a.nbytes) + ")");
    }
    return out;
}

TensorDirectory TensorDirectory::open(const std::filesystem::path& model_dir) {
    std::error_code ec;
    if (!std::filesystem::is_directory(model_dir, ec)) refuse(model_dir.string() + ": not a directory");
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(model_dir, ec))
        if (entry.path().extension() == ".safetensors" && entry.is_regular_file()) files.push_back(entry.path());
    if (ec) refuse(model_dir.string() + ": cannot list: " + ec.message());
    if (files.empty()) refuse(model_dir.string() + ": no *.safetensors shards");
    std::sort(files.begin(), files.end(),
              [](const auto& a, const auto& b) { return a.filename().string() < b.filename().string(); });

    TensorDirectory dir;
    std::vector<std::string> problems;
    auto note = [&](std::string p) { problems.push_back(std::move(p)); };

    // Every shard's header, each failure recorded (a broken shard does not hide the others).
    std::set<std::string> unreadable;  // shards already reported; the index is not checked against them
    for (const auto& path : files) {
        ShardInfo info;
        std::vector<TensorInfo> tensors;
        try {
            tensors = read_shard_header(path, int(dir.shards_.size()), &info);
        } catch (const Error& e) {
            note(e.what());
            info.path = path;
            unreadable.insert(path.filename().string());
        }
        dir.shards_.push_back(info);
        for (auto& t : tensors) {
            auto [it, inserted] = dir.by_name_.emplace(t.name, dir.tensors_.size());
            if (!inserted) {
                const TensorInfo& first = dir.tensors_[it->second];
                note("tensor " + shown_name(t.name) + " appears in both " +
                     dir.shards_[size_t(first.shard)].path.filename().string() + " and " +
                     path.filename().string());
                continue;
            }
            dir.tensors_.push_back(std::move(t));
        }
    }

    // The index, when present, must agree with the headers exactly.
    const auto index_path = model_dir / "model.safetensors.index.json";
    if (std::filesystem::exists(index_path, ec)) {
        const std::string index = index_path.filename().string();
        try {
            auto size = std::filesystem::file_size(index_path);
            if (size > uint64_t(kMaxSafetensorsHeader)) refuse(index + ": larger than the header limit");
            std::string text(size, '\0');
            Fd fd(index_path);
            if (fd.get() < 0 || !pread_all(fd.get(), text.data(), size, 0)) refuse(index + ": cannot read");
            json j = parse_strict_json(text, index, ErrorKind::Checkpoint);
            if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
                refuse(index + ": has no weight_map object");
            std::map<std::string, int> shard_by_file;
            for (size_t i = 0; i < dir.shards_.size(); ++i)
                shard_by_file[dir.shards_[i].path.filename().string()] = int(i);
            size_t listed = 0;
            for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
                const std::string name = shown_name(it.key());
                if (!it->is_string()) {
                    note(index + ": entry for " + name + " is not a file name");
                    continue;
                }
                const std::string file = it->get<std::string>();
                if (unreadable.count(file)) continue;
                auto sh = shard_by_file.find(file);
                const TensorInfo* t = dir.find(it.key());
                if (sh == shard_by_file.end()) {
                    note(index + ": tensor " + name + " is listed in " + file + ", which is not in the directory" +
                         (t ? " (the tensor is in " + dir.shards_[size_t(t->shard)].path.filename().string() + ")"
                            : " (missing shard?)"));
                } else if (!t) {
                    note(index + ": tensor " + name + " is listed in " + file + " but no shard holds it");
                } else if (t->shard != sh->second) {
                    note(index + ": tensor " + name + " is listed in " + file + " but is in " +
                         dir.shards_[size_t(t->shard)].path.filename().string());
                }
                if (t) ++listed;
            }
            if (unreadable.empty() && listed != dir.tensors_.size()) {
                for (const auto& t : dir.tensors_)
                    if (!j["weight_map"].contains(t.name))
                        note(index + ": tensor " + shown_name(t.name) + " in " +
                             dir.shards_[size_t(t.shard)].path.filename().string() + " is not listed in the index");
            }
            // metadata.total_size is the sum of all tensor bytes (headers excluded).
            if (j.contains("metadata") && j["metadata"].is_object() && j["metadata"].contains("total_size")) {
                int64_t declared = -1, actual = 0;
                for (const auto& t : dir.tensors_) actual += t.nbytes;
                if (!as_size(j["metadata"]["total_size"], &declared))
                    note(index + ": metadata.total_size is not a byte count");
                else if (declared != actual && problems.empty())
                    note(index + ": metadata.total_size is " + std::to_string(declared) +
                         " but the shards' tensors hold " + std::to_string(actual) + " bytes");
            }
        } catch (const Error& e) {
            note(e.what());
        } catch (const std::filesystem::filesystem_error& e) {
            note(index + ": " + e.what());
        }
    }

    if (!problems.empty()) {
        std::string msg = model_dir.string() + ": checkpoint refused (" + std::to_string(problems.size()) +
                          (problems.size() == 1 ? " problem):" : " problems):");
        for (size_t i = 0; i < problems.size() && i < kMaxListedProblems; ++i) msg += "\n  " + problems[i];
        if (problems.size() > kMaxListedProblems)
            msg += "\n  ... and " + std::to_string(problems.size() - kMaxListedProblems) + " more";
        refuse(msg);
    }
    return dir;
}

const TensorInfo* TensorDirectory::find(std::string_view name) const {
    auto it = by_name_.find(std::string(name));
    return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace k3

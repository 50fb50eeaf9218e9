// File, AlignedBuffer and ReadPool: exact bytes at odd offsets and lengths through O_DIRECT and
// the buffered fallback, short reads and EINTR continued, errors naming the file and offset.
#include <doctest/doctest.h>

#include "common/skip.h"

#include <cerrno>
#include <cstring>
#include <mutex>
#include <fcntl.h>
#include <unistd.h>

#include "io/file.h"
#include "io/read_pool.h"
#include "io/io_test_util.h"
#include "k3/error.h"

using namespace k3;
using namespace k3::io;
using k3::test::matches_pattern;
using k3::test::scratch_dir;
using k3::test::write_pattern_file;

namespace {

constexpr int64_t kFileSize = 5 * 4096 + 777;  // ends off any alignment boundary

void check_odd_reads(const File& f) {
    AlignedBuffer buf(window_capacity(kFileSize));
    const int64_t cases[][2] = {{0, 1},       {1, 1},          {4095, 2},        {4096, 4096}, {513, 4097},
                                {777, 12345}, {0, kFileSize},  {kFileSize - 1, 1}, {kFileSize - 5000, 5000}};
    for (const auto& c : cases) {
        CAPTURE(c[0]);
        CAPTURE(c[1]);
        std::memset(buf.data(), 0, buf.size());
        const uint8_t* payload = nullptr;
        Status s = f.read_run(c[0], c[1], buf.data(), buf.size(), &payload);
        REQUIRE(s.ok());
        CHECK(matches_pattern(payload, c[0], c[1]));
    }
}

// Test hooks: each one misbehaves in its own way, then reads for real.
int g_calls = 0;
ssize_t eintr_then_short(int fd, void* buf, size_t n, off_t off) {
    ++g_calls;
    if (g_calls % 3 == 1) {
        errno = EINTR;
        return -1;
    }
    // Return at most a little over half of what was asked: the caller must continue.
    size_t ask = n > 1000 ? n / 2 + 1 : n;
    return ::pread(fd, buf, ask, off);
}
ssize_t always_eio(int, void*, size_t, off_t) {
    errno = EIO;
    return -1;
}
ssize_t einval_like_refused_direct(int fd, void* buf, size_t n, off_t off) {
    // Pretend the filesystem refuses O_DIRECT reads: EINVAL on the direct descriptor only.
    int flags = fcntl(fd, F_GETFL);
    if (flags & O_DIRECT) {
        errno = EINVAL;
        return -1;
    }
    return ::pread(fd, buf, n, off);
}

struct HookGuard {
    explicit HookGuard(PreadFn fn) { set_pread_hook_for_tests(fn); }
    ~HookGuard() { set_pread_hook_for_tests(nullptr); }
};

}  // namespace

TEST_CASE("aligned buffers are aligned, big ones to 2 MiB") {
    AlignedBuffer small(1000), big(5 << 20);
    CHECK(reinterpret_cast<uintptr_t>(small.data()) % 4096 == 0);
    CHECK(reinterpret_cast<uintptr_t>(big.data()) % kHugePage == 0);
    big.data()[big.size() - 1] = 7;  // the whole size is usable
    AlignedBuffer moved = std::move(big);
    CHECK(moved.data()[moved.size() - 1] == 7);
    CHECK(big.data() == nullptr);
}

TEST_CASE("direct reads return exact bytes at odd offsets and lengths") {
    auto dir = scratch_dir("file-direct");
    write_pattern_file(dir / "a.bin", kFileSize);
    File f = File::open(dir / "a.bin");
    CHECK(f.size_at_open() == kFileSize);
    // Where the file system refuses O_DIRECT the file is buffered (tested below): say so as a skip.
    if (!f.direct()) K3_SKIP("the test directory's file system refuses O_DIRECT: direct reads are untested here");
    MESSAGE("O_DIRECT alignment " << f.alignment());
    CHECK((f.alignment() >= 512 && f.alignment() <= 4096));
    check_odd_reads(f);
}

TEST_CASE("buffered files (O_DIRECT not asked for, or refused) read the same bytes") {
    auto dir = scratch_dir("file-buffered");
    write_pattern_file(dir / "a.bin", kFileSize);
    File f = File::open(dir / "a.bin", /*try_direct=*/false);
    CHECK_FALSE(f.direct());
    check_odd_reads(f);

    // tmpfs refuses O_DIRECT at open: the file falls back to buffered reads.
    if (std::filesystem::exists("/dev/shm")) {
        auto shm = std::filesystem::path("/dev/shm") / ("k3-io-test-" + std::to_string(getpid()));
        write_pattern_file(shm, kFileSize);
        File g = File::open(shm);
        check_odd_reads(g);
        std::filesystem::remove(shm);
    }
}

TEST_CASE("EINVAL on the direct descriptor falls back to buffered reads for good") {
    auto dir = scratch_dir("file-einval");
    write_pattern_file(dir / "a.bin", kFileSize);
    File f = File::open(dir / "a.bin");
    HookGuard hook(einval_like_refused_direct);
    check_odd_reads(f);
    CHECK_FALSE(f.direct());
}

TEST_CASE("short reads and EINTR are continued, on both paths") {
    auto dir = scratch_dir("file-short");
    write_pattern_file(dir / "a.bin", kFileSize);
    for (bool direct : {true, false}) {
        File f = File::open(dir / "a.bin", direct);
        g_calls = 0;
        HookGuard hook(eintr_then_short);
        check_odd_reads(f);
        CHECK(g_calls > 9);  // the hook really was in the path
        std::vector<uint8_t> plain(3000);
        REQUIRE(f.pread_full(plain.data(), plain.size(), 1234).ok());
        CHECK(matches_pattern(plain.data(), 1234, 3000));
    }
}

TEST_CASE("failures name the file and the offset") {
    auto dir = scratch_dir("file-errors");
    write_pattern_file(dir / "a.bin", kFileSize);
    File f = File::open(dir / "a.bin");
    AlignedBuffer buf(window_capacity(kFileSize + 8192));
    const uint8_t* payload = nullptr;

    SUBCASE("a run past the end of the file is a short read, not garbage") {
        Status s = f.read_run(kFileSize - 100, 200, buf.data(), buf.size(), &payload);
        CHECK(s.code == StatusCode::IoError);
        CHECK(s.message.find("a.bin") != std::string::npos);
        CHECK(s.message.find("short read") != std::string::npos);
        CHECK(s.message.find(std::to_string(kFileSize)) != std::string::npos);  // where the bytes ran out
    }
    SUBCASE("an I/O error") {
        HookGuard hook(always_eio);
        Status s = f.read_run(8192 + 5, 100, buf.data(), buf.size(), &payload);
        CHECK(s.code == StatusCode::IoError);
        CHECK(s.message.find("a.bin") != std::string::npos);
        CHECK(s.message.find("at offset 8192") != std::string::npos);
        CHECK(s.message.find(std::strerror(EIO)) != std::string::npos);
    }
    SUBCASE("a missing file is a k3::Error naming it") {
        CHECK_THROWS_WITH_AS(File::open(dir / "missing.bin"), doctest::Contains("missing.bin"), Error);
    }
}

TEST_CASE("the read pool reads many runs, large ones in chunks, and reports failures") {
    auto dir = scratch_dir("pool");
    const int64_t size = 3 * kReadChunk + 12345;
    write_pattern_file(dir / "big.bin", size, 7);
    File f = File::open(dir / "big.bin");
    ReadPool pool(4);

    // One run spanning several chunks at an unaligned offset, plus small runs, out of order.
    struct Want {
        int64_t offset, n;
    };
    std::vector<Want> wants = {{size - 9999, 9999}, {3, 2 * kReadChunk + 5000}, {kReadChunk + 1, 1}, {4096, 4096}};
    std::vector<AlignedBuffer> bufs;
    std::vector<const uint8_t*> payloads(wants.size(), nullptr);
    std::vector<ReadRequest> reqs;
    for (size_t i = 0; i < wants.size(); ++i) {
        bufs.emplace_back(window_capacity(wants[i].n));
        ReadRequest r;
        r.file = &f;
        r.offset = wants[i].offset;
        r.nbytes = wants[i].n;
        r.buf = bufs.back().data();
        r.cap = bufs.back().size();
        r.done = [&payloads, i](const Status& s, const uint8_t* p) {
            if (s.ok()) payloads[i] = p;
        };
        reqs.push_back(std::move(r));
    }
    REQUIRE(pool.read_all(std::move(reqs)).ok());
    for (size_t i = 0; i < wants.size(); ++i) {
        REQUIRE(payloads[i] != nullptr);
        CHECK(matches_pattern(payloads[i], wants[i].offset, wants[i].n, 7));
    }

    // A request past the end fails with the file named; the good one beside it still lands.
    std::vector<ReadRequest> mixed(2);
    AlignedBuffer b1(window_capacity(100)), b2(window_capacity(100));
    const uint8_t* good = nullptr;
    mixed[0] = {&f, size - 50, 100, b1.data(), b1.size(), {}};
    mixed[1] = {&f, 100, 100, b2.data(), b2.size(), [&](const Status& s, const uint8_t* p) {
                    if (s.ok()) good = p;
                }};
    Status s = pool.read_all(std::move(mixed));
    CHECK(s.code == StatusCode::IoError);
    CHECK(s.message.find("big.bin") != std::string::npos);
    REQUIRE(good != nullptr);
    CHECK(matches_pattern(good, 100, 100, 7));
}

namespace {
std::mutex g_order_mu;
std::vector<off_t> g_order;
ssize_t record_offsets(int fd, void* buf, size_t n, off_t off) {
    {
        std::lock_guard lock(g_order_mu);
        g_order.push_back(off);
    }
    return ::pread(fd, buf, n, off);
}
}  // namespace

TEST_CASE("requests handed over together are issued in offset order") {
    auto dir = scratch_dir("pool-order");
    write_pattern_file(dir / "f.bin", 1 << 20);
    File f = File::open(dir / "f.bin");
    ReadPool pool(1);  // one reader: issue order is execution order
    const int64_t offsets[] = {700000, 5000, 300000, 90000, 512000};
    std::vector<AlignedBuffer> bufs;
    std::vector<ReadRequest> reqs;
    for (int64_t off : offsets) {
        bufs.emplace_back(window_capacity(4000));
        reqs.push_back({&f, off, 4000, bufs.back().data(), bufs.back().size(), {}});
    }
    g_order.clear();
    {
        HookGuard hook(record_offsets);
        REQUIRE(pool.read_all(std::move(reqs)).ok());
    }
    REQUIRE(g_order.size() >= 5);
    for (size_t i = 1; i < g_order.size(); ++i) CHECK(g_order[i - 1] < g_order[i]);
}

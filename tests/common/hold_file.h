// The daemon's test hooks that hold it at a known point while a file exists
// (docs/development.md, "Tests wait on states"): --test-hold-prefill, --test-hold-pass,
// --test-hold-grammar-compile, --test-hold-background-load (EngineOptions::hold_pass and
// MemoryOptions::hold_background_load in the engine). A HoldFile makes the file; the test hands
// `file` to the daemon's flag or the engine's option; release() lets it go on, hold() stops it
// there again.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>

#include "common/scratch.h"

namespace k3::test {

struct HoldFile {
    explicit HoldFile(const std::string& file_name) : file(process_scratch_root() / file_name) { hold(); }
    void hold() { std::ofstream(file).put('x'); }
    void release() { std::filesystem::remove(file); }
    ~HoldFile() { release(); }
    HoldFile(const HoldFile&) = delete;
    HoldFile& operator=(const HoldFile&) = delete;

    std::filesystem::path file;
};

}  // namespace k3::test

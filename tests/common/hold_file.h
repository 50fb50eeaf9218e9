// The daemon's test hooks that hold it at a known point while a file exists
// (docs/development.md, "Tests wait on states"): K3_TEST_HOLD_PREFILL, K3_TEST_HOLD_PASS,
// K3_TEST_HOLD_GRAMMAR_COMPILE, K3_TEST_HOLD_BACKGROUND_LOAD. While a HoldFile lives, the
// environment names its file, so a daemon started meanwhile inherits the hook; release() lets
// the daemon go on, hold() stops it there again.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/scratch.h"

namespace k3::test {

struct HoldFile {
    HoldFile(std::string env_name, const std::string& file_name)
        : env(std::move(env_name)), file(process_scratch_root() / file_name) {
        hold();
        setenv(env.c_str(), file.c_str(), 1);
    }
    void hold() { std::ofstream(file).put('x'); }
    void release() { std::filesystem::remove(file); }
    ~HoldFile() {
        release();
        unsetenv(env.c_str());
    }
    HoldFile(const HoldFile&) = delete;
    HoldFile& operator=(const HoldFile&) = delete;

    std::string env;
    std::filesystem::path file;
};

}  // namespace k3::test

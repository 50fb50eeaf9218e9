// Where tests put files: $K3_TEST_TMP (set by ctest to build/test-tmp), and inside it a directory
// private to this test process, so test cases that ctest runs side by side never share a path.
// The private directory is removed when the process ends, unless a test failed or
// K3_KEEP_TEST_TMP=1 (then its path is printed, for a look at what the test left).
#pragma once
#include <filesystem>
#include <string>

namespace k3::test {

// The variable's value, or `fallback` when it is unset or empty.
std::string env_or(const char* name, const std::string& fallback);
// The variable's value; throws naming it when it is unset (the test was not run through ctest).
std::string env_or_throw(const char* name);

// $K3_TEST_TMP, or /tmp/k3-test outside ctest. Shared by every test process (model cache).
std::filesystem::path test_tmp_root();
// A fresh, empty directory `name` inside this process's private scratch directory.
std::filesystem::path scratch_dir(const std::string& name);
// A path inside this process's private scratch directory that does not exist (removed if it
// did), for a tool that insists on creating its output directory itself.
std::filesystem::path scratch_path(const std::string& name);
// This process's private scratch directory itself (created on first use).
std::filesystem::path process_scratch_root();
// Called once by the test main when the run ends: removes the private directory unless kept.
void finish_scratch(bool keep);

std::string read_file(const std::filesystem::path& path);
void write_file(const std::filesystem::path& path, const std::string& bytes);

}  // namespace k3::test

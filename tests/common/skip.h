// Reported skips. A test that cannot run here (no real tokenizer directory, a kernel set this
// CPU lacks, no O_DIRECT on the test file system) calls K3_SKIP("why") and returns; the test
// main then exits with kSkipExitCode, which ctest shows as "Not Run (Skipped)" with the reason in
// the output, instead of a pass that checked nothing.
#pragma once
#include <string>

namespace k3::test {

// The exit code ctest's SKIP_RETURN_CODE is set to for every registered test case.
inline constexpr int kSkipExitCode = 77;

// Records that the running test case skipped, printing `why`.
void mark_skipped(const std::string& why);
// How many test cases called mark_skipped in this process.
int skipped_count();

}  // namespace k3::test

// Skips the rest of the current test case (or subcase) and says why.
#define K3_SKIP(why)                           \
    do {                                       \
        ::k3::test::mark_skipped(why);         \
        return;                                \
    } while (0)

// The one doctest main() every test binary links. ctest runs one test case per process
// (tests/CMakeLists.txt registers each case on its own), so when every case that ran skipped,
// the process exits with kSkipExitCode and ctest reports a skip rather than a pass.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <set>
#include <string>

#include "common/scratch.h"
#include "common/skip.h"

namespace k3::test {

namespace {
std::set<std::string> g_skipped_cases;
int g_cases_run = 0;

// Counts the test cases that ran (a listener sees every test case start, whatever the reporter).
struct CaseCounter : doctest::IReporter {
    explicit CaseCounter(const doctest::ContextOptions&) {}
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats&) override {}
    void test_case_start(const doctest::TestCaseData&) override { ++g_cases_run; }
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};
}  // namespace

void mark_skipped(const std::string& why) {
    std::fprintf(stderr, "SKIPPED: %s\n", why.c_str());
    std::fflush(stderr);
    const doctest::ContextOptions* options = doctest::getContextOptions();
    g_skipped_cases.insert(options && options->currentTest ? options->currentTest->m_name : "?");
}

int skipped_count() { return int(g_skipped_cases.size()); }

}  // namespace k3::test

REGISTER_LISTENER("k3_case_counter", 1, k3::test::CaseCounter);

int main(int argc, char** argv) {
    doctest::Context context(argc, argv);
    const int failed = context.run();
    k3::test::finish_scratch(/*keep=*/failed != 0);
    if (failed != 0 || context.shouldExit()) return failed;
    const int skipped = k3::test::skipped_count();
    if (skipped > 0 && skipped == k3::test::g_cases_run) return k3::test::kSkipExitCode;
    return 0;
}

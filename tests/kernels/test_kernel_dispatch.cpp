// Which kernel set runs: the table's rows (kernel_sets()), the best usable one chosen once, names
// found exactly; and one case per row that is skipped, visibly, where the set is not built or the
// CPU lacks it ("kernels: the neon set is available on this machine ...", which
// scripts/cross-test.sh requires to pass under emulation). The per-row cases are registered from
// the table, so a new row gets its case without a line here.
#include <doctest/doctest.h>

#include "common/skip.h"

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <set>
#include <string>
#include <utility>

#include "k3/kernel_set_names.h"
#include "kernels/kernel_sets.h"
#include "kernels/kernels.h"

using namespace k3;

TEST_CASE("kernel sets: one row per name, scalar first and always usable, the best usable chosen once") {
    const auto sets = kernel_sets();
    REQUIRE(!sets.empty());
    CHECK(std::string(sets[0].name) == "scalar");
    CHECK(sets[0].usable() == &scalar_kernels());
    std::set<std::string> names;
    const Kernels* best = nullptr;
    for (const KernelSet& set : sets) {
        const std::string name = set.name;
        CAPTURE(name);
        CHECK(names.insert(set.name).second);  // no name twice
        CHECK(find_kernel_set(set.name) == &set);
        CHECK(std::string(set.needs) != "");
        if (const Kernels* k = set.usable()) {
            CHECK(std::string(k->name) == set.name);  // a row's table carries the row's name
            CHECK(set.usable() == k);                 // probed once, the same table every time
            best = k;
        }
    }
    CHECK(&select_kernels() == best);  // the last usable row
    CHECK(&select_kernels() == &select_kernels());
    CHECK(find_kernel_set("bogus") == nullptr);
    CHECK(find_kernel_set("") == nullptr);
    CHECK(find_kernel_set("AVX2") == nullptr);  // names are exact
}

TEST_CASE("kernel sets: the names for the layers above are the table's, in its order") {
    std::string list;
    std::vector<std::string> names;
    for (const KernelSet& set : kernel_sets()) {
        list += (list.empty() ? "" : ", ") + std::string(set.name);
        names.emplace_back(set.name);
    }
    CHECK(kernel_set_list() == list);
    CHECK(kernel_set_names() == names);
    CHECK(kernel_set_list().rfind("scalar, ", 0) == 0);
}

// One case per row: "the NAME set is available on this machine (else the NAME kernels are
// untested here)", skipped (reported to ctest as such) where the set is not built or the CPU
// lacks it, so a machine that silently tested only part of the kernels shows it.
namespace {

constexpr int kMaxRows = 16;

template <int I>
void row_available_case() {
    const KernelSet& set = kernel_sets()[I];
    if (set.usable() == nullptr)
        K3_SKIP(std::string(set.name) + " kernel set not built or not supported by this CPU (it needs " + set.needs +
                "): its tests did not run");
    CHECK(std::string(set.usable()->name) == set.name);
}

template <int... I>
int register_row_cases(std::integer_sequence<int, I...>) {
    static std::deque<std::string> names;  // doctest keeps the pointer
    using Case = void (*)();
    constexpr Case cases[] = {row_available_case<I>...};
    const auto sets = kernel_sets();
    if (sets.size() > size_t(kMaxRows)) {
        std::fprintf(stderr, "test_kernel_dispatch.cpp: the table has more than kMaxRows rows: raise it\n");
        std::abort();
    }
    for (size_t i = 1; i < sets.size(); ++i) {  // scalar is always usable
        names.push_back("the " + std::string(sets[i].name) + " set is available on this machine (else the " +
                        sets[i].name + " kernels are untested here)");
        doctest::detail::regTest(doctest::detail::TestCase(cases[i], __FILE__, __LINE__,
                                                           doctest_detail_test_suite_ns::getCurrentTestSuite()) *
                                 names.back().c_str());
    }
    return 0;
}

[[maybe_unused]] const int registered = register_row_cases(std::make_integer_sequence<int, kMaxRows>{});

}  // namespace

// Which process owns which routed experts under expert parallelism (docs/operations.md "Several
// machines"): rank r of n owns experts [n_experts * r / n, n_experts * (r + 1) / n) of every MoE
// layer. Contiguous shares keep a rank's reads in file order, and make rank 0's share a prefix
// of a chunk's ascending expert union, so the rows each rank computes are one contiguous stretch
// of the expert-sorted rows (model/moe.cpp).
#pragma once
#include <cstdint>

namespace k3 {

struct ExpertShare {
    int rank = 0;
    int ranks = 1;

    int begin(int n_experts) const { return int(int64_t(n_experts) * rank / ranks); }
    int end(int n_experts) const { return int(int64_t(n_experts) * (rank + 1) / ranks); }
    int count(int n_experts) const { return end(n_experts) - begin(n_experts); }
    bool owns(int expert, int n_experts) const { return expert >= begin(n_experts) && expert < end(n_experts); }
    // The rank that owns `expert`.
    static int owner(int expert, int n_experts, int ranks) {
        int r = 0;
        while (r + 1 < ranks && ExpertShare{r + 1, ranks}.begin(n_experts) <= expert) ++r;
        return r;
    }
};

}  // namespace k3

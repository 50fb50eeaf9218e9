// kernel_set_names, kernel_set_list (k3/kernel_set_names.h): read from the kernel-set table.
#include "k3/kernel_set_names.h"
#include "kernels/kernels.h"

namespace k3 {

std::vector<std::string> kernel_set_names() {
    std::vector<std::string> names;
    for (const KernelSet& set : kernel_sets()) names.emplace_back(set.name);
    return names;
}

std::string kernel_set_list() {
    std::string list;
    for (const KernelSet& set : kernel_sets()) {
        if (!list.empty()) list += ", ";
        list += set.name;
    }
    return list;
}

}  // namespace k3

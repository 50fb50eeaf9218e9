// The kernel sets' names for the layers above the engine: what EngineOptions::kernels,
// --kernels and K3_KERNELS accept besides "" (the best set this CPU has). They come from the one
// kernel-set table (engine/kernels/kernel_table.cpp), whether or not this build and CPU run
// every set, so the daemon's allowed values and the usage texts never list them by hand.
#pragma once
#include <string>
#include <vector>

namespace k3 {

// Every set's name, in the table's order ("scalar" first).
std::vector<std::string> kernel_set_names();
// The same names joined by ", ", for help texts.
std::string kernel_set_list();

}  // namespace k3

// How many compute threads to use by default: the number of physical cores (SMT siblings share
// the memory bandwidth that decode is bound by, and only add contention).
#pragma once

namespace k3 {

// Distinct (package, core) pairs in /proc/cpuinfo, else sysfs core ids, else the logical count.
int physical_cores();

}  // namespace k3

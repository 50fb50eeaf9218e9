// physical_cores (k3/options.h).
#include "k3/options.h"

#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace k3 {

namespace {

int from_proc_cpuinfo() {
    std::ifstream in("/proc/cpuinfo");
    std::set<std::pair<int, int>> cores;
    int package = 0, core = -1;
    std::string line;
    auto value = [](const std::string& l) { return std::stoi(l.substr(l.find(':') + 1)); };
    while (std::getline(in, line)) {
        if (line.rfind("physical id", 0) == 0) package = value(line);
        else if (line.rfind("core id", 0) == 0) core = value(line);
        else if (line.empty() && core >= 0) {
            cores.insert({package, core});
            core = -1;
        }
    }
    if (core >= 0) cores.insert({package, core});
    return int(cores.size());
}

int from_sysfs() {
    std::set<std::pair<int, int>> cores;
    for (int cpu = 0;; ++cpu) {
        const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
        std::ifstream c(base + "core_id"), p(base + "physical_package_id");
        int core = -1, package = 0;
        if (!(c >> core)) break;
        p >> package;
        cores.insert({package, core});
    }
    return int(cores.size());
}

}  // namespace

int physical_cores() {
    int n = 0;
    try {
        n = from_proc_cpuinfo();
        if (n <= 0) n = from_sysfs();
    } catch (...) {
        n = 0;
    }
    if (n <= 0) n = int(std::thread::hardware_concurrency());
    return n > 0 ? n : 1;
}

}  // namespace k3

// config.json (weights/config.h): any text is a ModelConfig or a k3::Error naming the problem.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "k3/error.h"
#include "weights/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        k3::ModelConfig c = k3::parse_config(std::string(reinterpret_cast<const char*>(data), size), "fuzz/config.json");
        (void)k3::describe(c);
    } catch (const k3::Error&) {
    }
    return 0;
}

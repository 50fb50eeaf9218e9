// The real `k3serve serve` (and `verify`) on copies of the tiny model with one file made hostile:
// a config.json inside every single cap that the files cannot hold, and a tokenizer line whose
// rank is far past the file. Each is refused at once with exit 2 and a reason, before anything
// is sized by the hostile number.
#include <doctest/doctest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/daemon.h"
#include "common/model_cache.h"
#include "common/scratch.h"

using namespace k3::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

fs::path copy_of_tiny(const std::string& name) {
    fs::path dir = scratch_dir(name);
    for (const auto& entry : fs::directory_iterator(cached_model("tiny"))) fs::copy_file(entry.path(), dir / entry.path().filename());
    return dir;
}

}  // namespace

TEST_CASE("tiny model: a config.json the shards cannot hold (65,536 experts) is refused with exit 2 before any tensor is listed") {
    fs::path dir = copy_of_tiny("many-experts");
    json config = json::parse(read_file(dir / "config.json"));
    config["text_config"]["num_experts"] = 65536;
    write_file(dir / "config.json", config.dump(2));
    DaemonProcess d({dir.string(), "--port", "0"}, /*wait_ready=*/false);
    CHECK(d.wait_exit() == 2);
    INFO(d.log());
    CHECK(d.log().find("config.json implies") != std::string::npos);
    CHECK(d.log().find("65536 experts each") != std::string::npos);
    CHECK(d.log().find("the config does not describe these files") != std::string::npos);
}

TEST_CASE("tiny model: a tokenizer rank past the file's lines is refused with exit 2 naming the line") {
    fs::path dir = copy_of_tiny("far-rank");
    std::string ranks = read_file(dir / "tiktoken.model");
    write_file(dir / "tiktoken.model", ranks + "//79 15999999\n");
    DaemonProcess d({dir.string(), "--port", "0"}, /*wait_ready=*/false);
    CHECK(d.wait_exit() == 2);
    INFO(d.log());
    CHECK(d.log().find("rank 15999999 is beyond the file's") != std::string::npos);
    CHECK(d.log().find("tiktoken.model:") != std::string::npos);
}

// Synthetic test models, written once by $K3_MAKE_MODEL_BIN (k3-test-make-model: k3serve's
// `make-model --preset P --seed S` without the server; `$K3SERVE_BIN make-model` when it is unset)
// and shared by every test process under $K3_TEST_TMP/models/<preset>-<seed>. A cached model is
// reused only when a hash of all its files matches the one recorded right after it was written
// and it came from the same writer binary; otherwise (a crash half-way through, a file changed
// by hand, a rebuilt generator) it is written again. Making and checking happen under a file
// lock, so test cases running side by side never see a half-written model.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

namespace k3::test {

// The directory of the cached model for `preset` and `seed` (make-model's default seed is 0).
std::string cached_model(const std::string& preset, uint64_t seed = 0);

// A 64-bit content hash of every regular file under `dir` (names, sizes and bytes, in name
// order), as recorded in the cache's manifest.
uint64_t hash_directory(const std::filesystem::path& dir);

}  // namespace k3::test

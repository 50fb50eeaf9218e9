// GET /slots: the jobs the engine worker runs now (one entry per slot, with its progress), the
// queue, how many steps were batched, and the prompt cache in summary: its totals over every
// partition, and the entries of the asker's partition only (another key's entries would tell it
// the lengths of that key's prompts; docs/operations.md "The prompt cache and API keys").
#pragma once
#include <nlohmann/json.hpp>

#include "ops/slot_board.h"

namespace k3::server {

nlohmann::json slots_json(const SlotBoardView& view, uint64_t partition);

}  // namespace k3::server

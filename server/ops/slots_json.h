// GET /slots: the jobs the engine worker runs now (one entry per slot, with its progress), the
// queue, how many steps were batched, and the shared prompt cache in summary.
#pragma once
#include <nlohmann/json.hpp>

#include "ops/slot_board.h"

namespace k3::server {

nlohmann::json slots_json(const SlotBoardView& view);

}  // namespace k3::server

// How large a forward chunk is: the scratch one token of a chunk takes (model/activations.h
// allocates it) and the chunk the engine uses without a prefill budget. From the config alone,
// so the memory plan (store) can size the prefill chunk before the model exists.
#pragma once
#include <cstdint>

#include "weights/config.h"

namespace k3 {

// Bytes of forward-pass scratch (Activations) per token of a chunk.
int64_t activation_bytes_per_token(const ModelConfig& cfg);

// The chunk without a prefill budget: up to 256 tokens (a larger chunk reads each weight once
// for more tokens and gives each routed expert more tokens per acquisition), but no more than
// keeps the activations near 256 MB (Kimi K3: about 100 tokens).
int chunk_tokens_for(const ModelConfig& cfg);

// The most tokens a chunk may have, whatever the prefill budget.
inline constexpr int kMaxChunkTokens = 8192;

}  // namespace k3

// Choosing a decoder's next token from its logits (Generator): greedy or sampled with
// temperature, top-k and top-p, and the check of the options that say how.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "lumen/generate.h"

namespace lumen {

// Throws InvalidArgument naming the first option out of range (max_new_tokens, temperature when
// sampling, top_k, top_p, pad_token_id).
void check_options(const GenerateOptions& o);

// The next token from one row of `vocab` logits: greedy (the first maximum) or sampled as `o`
// says, drawing from `rng`; `scratch` is reused between calls.
int64_t choose_token(const float* logits, int64_t vocab, const GenerateOptions& o,
                     std::mt19937_64& rng, std::vector<std::pair<float, int64_t>>& scratch);

}  // namespace lumen

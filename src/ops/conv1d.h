// Causal depthwise 1-D convolution followed by SiLU: the short convolution of a Gated DeltaNet
// layer. No bias; weight tap K-1 multiplies the current token.
#pragma once
#include <cstdint>

namespace stave::ref {

// x, y: [tokens, channels] (token-major, as a linear layer writes them).
// weight: [channels, kernel] (the checkpoint's conv1d.weight [C, 1, K] without the 1).
// history: [kernel-1, channels], the pre-convolution inputs of the kernel-1 tokens before x[0]
//   (oldest first; zeros at the start of a sequence). On return it holds the last kernel-1
//   pre-convolution inputs, so a sequence can be fed in pieces (prefill chunks, decode steps).
// y[t, c] = silu( Σ_j weight[c, j] · in[t - (kernel-1) + j, c] ), in[s<0] read from history.
void causal_conv1d_silu(const float* x, int64_t tokens, int64_t channels, const float* weight, int64_t kernel,
                        float* history, float* y);

}  // namespace stave::ref

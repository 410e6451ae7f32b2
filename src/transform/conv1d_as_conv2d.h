// 1-D convolutions (Whisper's and wav2vec's audio front ends, 1-D CNNs) as 2-D ones of height 1, the
// form the conv kernels run: Conv(x [N,C,L], W [K,C/G,k]) becomes
// Squeeze(Conv(Unsqueeze(x) [N,C,1,L], W [K,C/G,1,k]), axis 2), pads, strides, dilations and
// kernel_shape gaining a leading 1 (0 for pads). The same sums in the same order: exact.
#pragma once

#include "ir/graph.h"

namespace sabre::transform {

/** Every Conv with a rank-3 input, a constant rank-3 filter and no auto_pad. Tests:
    tests/golden/conv1d_as_conv2d/ */
ir::Graph conv1d_as_conv2d(ir::Graph g);

}  // namespace sabre::transform

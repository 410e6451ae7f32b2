// Grouped convolutions regrouped into fewer, wider groups that implicit-GEMM kernels run on tensor
// cores: G groups of C/G input and K/G output channels become G/m groups of m·C/G and m·K/G, the
// filter block-diagonal inside each new group (zeros where an output channel meets an input channel
// of another old group). The result is the same function; the kernels do m times the multiply-adds
// in exchange for tiles that fill the tensor cores. G/m = 1 leaves a dense conv.
#pragma once

#include <cstdint>

#include "ir/graph.h"

namespace sabre::transform {

struct RegroupOptions {
  // The new group's output channels m·K/G must be a multiple of k_multiple (a kernel tile's N) and
  // its input channels m·C/G a multiple of c_multiple (the kernel's vector access).
  int64_t k_multiple = 32;
  int64_t c_multiple = 8;
  // Where no divisor of G meets the multiples (RegNet's 13, 26 or 55 groups of 8 channels), a conv
  // of at most this many groups becomes dense (m = G): G times the multiply-adds on the dense
  // kernels still beats the native grouped kernel's one thread per output.
  int64_t max_dense_groups = 64;
};

// For a Conv with `groups` G, c_per_group input and k_per_group output channels a group: the
// smallest divisor m of G meeting RegroupOptions (else G, dense, under max_dense_groups), or 0 where
// the conv is left alone: not grouped, already fit (m = 1), or depthwise-like (one input channel a
// group: the native depthwise kernel reads each input once, a regrouped one would multiply by zeros
// m times over).
int64_t regroup_factor(int64_t groups, int64_t c_per_group, int64_t k_per_group, const RegroupOptions& o);

/** Every 2-D Conv with constant filter, group G > 1 and regroup_factor m > 0 becomes a Conv of
    group G/m with the filter [K, m·C/G, R, S] (block-diagonal, zero elsewhere). Tests:
    tests/golden/regroup_convs/ */
ir::Graph regroup_convs(ir::Graph g, const RegroupOptions& o = {});

}  // namespace sabre::transform

// The parameter block of every elementwise-chain kernel, generated or interpreted.
//
// Plain C so that it compiles as host C++, as CUDA, and inside generated kernel sources (the
// generator pastes this file's text into each source it writes, so an artifact's kernels and the
// runtime that fills this struct agree by construction). Tests: tests/unit/native_codegen_test.cpp
#pragma once

#define SABRE_EW_MAX_RANK 6
#define SABRE_EW_MAX_INPUTS 8
#define SABRE_EW_MAX_OUTPUTS 4
#define SABRE_EW_MAX_NODES 48
// Elements per thread on the vectorized path of generated kernels.
#define SABRE_EW_VEC 8

// Shapes are collapsed on the host (adjacent dims merged where every input agrees), so rank is
// usually 1 or 2. Inputs are read through strides (0 = broadcast); outputs are dense row-major.
struct SabreEwParams {
  long long n;     // output elements
  int rank;        // dims used, 1..SABRE_EW_MAX_RANK
  int vec;         // 1, or SABRE_EW_VEC when the host proved the vector path legal
  long long dims[SABRE_EW_MAX_RANK];
  long long in_strides[SABRE_EW_MAX_INPUTS][SABRE_EW_MAX_RANK];  // in elements
  const void* in[SABRE_EW_MAX_INPUTS];
  void* out[SABRE_EW_MAX_OUTPUTS];
};

// One bytecode instruction of the interpreter kernel: node i of the chain writes register i.
struct SabreEwInstr {
  unsigned char op;     // sabre::native::EwOp
  unsigned char dtype;  // result dtype (sabre::ir::DType)
  unsigned char a, b, c;  // operand registers (or input slot for EwOp::input)
  unsigned char src_dtype;  // dtype of operand a (casts and comparisons need it)
  unsigned char pad0, pad1;
  float alpha, beta;    // immediates: leaky_relu slope, clip bounds, constant value, ...
};

struct SabreEwProgram {
  int num_nodes;
  int num_outputs;
  unsigned char out_node[SABRE_EW_MAX_OUTPUTS];
  struct SabreEwInstr code[SABRE_EW_MAX_NODES];
};

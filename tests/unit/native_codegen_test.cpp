// CPU tests of the elementwise-chain host code: validation, bytecode, parameter blocks, and the
// generated CUDA source (which NativeCodegenNvcc compiles with nvcc when one is installed).
// The GPU side (running both paths against the reference) is tests/gpu/native_elementwise_test.cpp.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "backends/native/elementwise.h"
#include "codegen/compile.h"

namespace sabre::native {
namespace {

ElementwiseChain bias_gelu(DType dt) {
  ElementwiseChain ch;
  ch.inputs = {dt, dt};
  ch.outputs = {ch.unary(EwOp::gelu_erf, ch.binary(EwOp::add, ch.input(0), ch.input(1)))};
  return ch;
}

// One chain through every float op added for issue 29 (Sin .. PRelu) and one through the integer ones.
ElementwiseChain new_float_ops(DType dt) {
  ElementwiseChain ch;
  ch.inputs = {dt, dt};
  int x = ch.input(0);
  const int s = ch.input(1);
  for (EwOp op : {EwOp::sin, EwOp::cos, EwOp::tan, EwOp::asin, EwOp::acos, EwOp::atan, EwOp::sinh, EwOp::cosh,
                  EwOp::asinh, EwOp::acosh, EwOp::atanh, EwOp::ceil, EwOp::floor, EwOp::round, EwOp::softplus,
                  EwOp::softsign, EwOp::mish, EwOp::elu, EwOp::selu, EwOp::celu, EwOp::thresholded_relu,
                  EwOp::shrink, EwOp::sign})
    x = ch.unary(op, x, 0.5f, 1.5f);
  for (EwOp op : {EwOp::mod, EwOp::fmod, EwOp::prelu}) x = ch.binary(op, x, s);
  ch.outputs = {x, ch.unary(EwOp::isnan, x), ch.unary(EwOp::isinf, x, 1.f, 0.f)};
  return ch;
}

ElementwiseChain new_int_ops(DType dt) {
  ElementwiseChain ch;
  ch.inputs = {dt, dt};
  const int a = ch.input(0), b = ch.input(1);
  int x = ch.binary(EwOp::mod, a, b);
  x = ch.binary(EwOp::fmod, x, b);
  x = ch.binary(EwOp::shl, x, b);
  x = ch.binary(EwOp::shr, x, b);
  ch.outputs = {ch.unary(EwOp::sign, x)};
  return ch;
}

TEST(NativeElementwise, NewOpsFollowTheKindRules) {
  EXPECT_NO_THROW(validate(new_float_ops(DType::f16)));
  EXPECT_NO_THROW(validate(new_int_ops(DType::u8)));
  const ElementwiseChain f = new_float_ops(DType::f32);
  EXPECT_EQ(f.nodes[f.outputs[1]].dtype, DType::boolean);  // isnan / isinf give bool
  EXPECT_EQ(f.nodes[f.outputs[2]].dtype, DType::boolean);
  ElementwiseChain shift_float;  // shifts take integers only
  shift_float.inputs = {DType::f32, DType::f32};
  shift_float.outputs = {shift_float.binary(EwOp::shl, shift_float.input(0), shift_float.input(1))};
  EXPECT_THROW(validate(shift_float), std::invalid_argument);
  ElementwiseChain sin_int;  // trig takes floats only
  sin_int.inputs = {DType::i64};
  sin_int.outputs = {sin_int.unary(EwOp::sin, sin_int.input(0))};
  EXPECT_THROW(validate(sin_int), std::invalid_argument);
  ElementwiseChain isnan_int;
  isnan_int.inputs = {DType::i32};
  isnan_int.outputs = {isnan_int.unary(EwOp::isnan, isnan_int.input(0))};
  EXPECT_THROW(validate(isnan_int), std::invalid_argument);
}

// Every op has a formula in the generated source (the generator throws for one without).
TEST(NativeCodegen, NewOpsHaveFormulas) {
  const std::string fs = generate_elementwise_kernel(new_float_ops(DType::bf16));
  for (const char* want : {"sinf(", "rintf(", "sabre_ew::f_mish(", "sabre_ew::f_selu(", "sabre_ew::f_mod(", "fmodf(",
                           "sabre_ew::f_prelu(", "sabre_ew::f_isinf("})
    EXPECT_NE(fs.find(want), std::string::npos) << want;
  const std::string is = generate_elementwise_kernel(new_int_ops(DType::u8));
  for (const char* want : {"sabre_ew::i_mod(", "sabre_ew::i_fmod(", "(unsigned char)sabre_ew::i_shl(", "sabre_ew::i_shr(",
                           "sabre_ew::i_sign("})
    EXPECT_NE(is.find(want), std::string::npos) << want;
}

TEST(NativeElementwise, ValidateRejectsBadChains) {
  ElementwiseChain ch;
  ch.inputs = {DType::f16, DType::i64};
  const int a = ch.input(0), b = ch.input(1);
  ch.outputs = {ch.binary(EwOp::add, a, b)};  // float + int: the importer must cast first
  EXPECT_THROW(validate(ch), std::invalid_argument);
  ElementwiseChain f64;
  f64.inputs = {DType::f64};
  f64.outputs = {f64.input(0)};
  EXPECT_THROW(validate(f64), std::invalid_argument);
  ElementwiseChain fwd;
  fwd.inputs = {DType::f32};
  fwd.nodes.push_back({EwOp::neg, DType::f32, 1});  // operand after its user
  fwd.input(0);
  fwd.outputs = {0};
  EXPECT_THROW(validate(fwd), std::invalid_argument);
  EXPECT_NO_THROW(validate(bias_gelu(DType::bf16)));
}

TEST(NativeElementwise, ProgramMirrorsChain) {
  const ElementwiseChain ch = bias_gelu(DType::f16);
  const SabreEwProgram p = compile_program(ch);
  ASSERT_EQ(p.num_nodes, 4);
  EXPECT_EQ(p.code[3].op, static_cast<unsigned char>(EwOp::gelu_erf));
  EXPECT_EQ(p.code[3].a, 2);
  EXPECT_EQ(p.num_outputs, 1);
  EXPECT_EQ(p.out_node[0], 3);
}

TEST(NativeElementwise, ParamsMergeDimsAndPickVectorPath) {
  const ElementwiseChain ch = bias_gelu(DType::f16);
  alignas(16) static char buf[64];
  // [2, 128, 768] + [768]: rows merge to [256, 768]; bias broadcast along rows.
  SabreEwParams p = prepare_params(ch, {2, 128, 768}, {{2, 128, 768}, {768}}, {buf, buf}, {buf});
  ASSERT_EQ(p.rank, 2);
  EXPECT_EQ(p.dims[0], 256);
  EXPECT_EQ(p.dims[1], 768);
  EXPECT_EQ(p.in_strides[0][0], 768);
  EXPECT_EQ(p.in_strides[1][0], 0);
  EXPECT_EQ(p.in_strides[1][1], 1);
  EXPECT_EQ(p.vec, SABRE_EW_VEC);
  // A pointer off 16-byte alignment or an odd last dim falls back to the scalar path.
  EXPECT_EQ(prepare_params(ch, {256, 768}, {{256, 768}, {768}}, {buf + 2, buf}, {buf}).vec, 1);
  EXPECT_EQ(prepare_params(ch, {7, 13}, {{7, 13}, {13}}, {buf, buf}, {buf}).vec, 1);
  // Same-shape inputs collapse to one dim.
  EXPECT_EQ(prepare_params(ch, {3, 5, 7}, {{3, 5, 7}, {3, 5, 7}}, {buf, buf}, {buf}).rank, 1);
  EXPECT_THROW(prepare_params(ch, {4, 8}, {{4, 8}, {3}}, {buf, buf}, {buf}), std::invalid_argument);
}

TEST(NativeCodegen, SourceNamesKernelAndOps) {
  const ElementwiseChain ch = bias_gelu(DType::f16);
  const std::string src = generate_elementwise_kernel(ch);
  const std::string name = kernel_name(ch);
  EXPECT_EQ(name.rfind("sabre_ew_", 0), 0u);
  EXPECT_NE(src.find("extern \"C\" __global__ void __launch_bounds__(256) " + name + "("), std::string::npos);
  EXPECT_NE(src.find("sabre_ew::f_gelu_erf(v2)"), std::string::npos);
  EXPECT_NE(src.find("struct SabreEwParams"), std::string::npos);  // self-contained
  // Gelu's math is backends/gelu_erf.h, the CUTLASS epilogues' too, pasted ahead of ew_device.cuh.
  const size_t gelu = src.find("float f_gelu_erf(float x) { return sabre_gelu::gelu_erf(x); }");
  EXPECT_NE(gelu, std::string::npos);
  EXPECT_LT(src.find("namespace sabre_gelu {"), gelu);
  EXPECT_EQ(src.find("#include \"backends"), std::string::npos);
  // The name is the chain's identity: another dtype or op gives another kernel.
  EXPECT_NE(kernel_name(bias_gelu(DType::bf16)), name);
  EXPECT_EQ(kernel_name(bias_gelu(DType::f16)), name);
}

// Compiles generated kernels for a spread of ops and dtypes with nvcc (seconds): runs under the
// ctest label nvcc (test native_codegen_nvcc sets SABRE_TEST_NVCC=1), skipped in the unit run.
TEST(NativeCodegenNvcc, GeneratedSourcesCompile) {
  if (!std::getenv("SABRE_TEST_NVCC")) GTEST_SKIP() << "set SABRE_TEST_NVCC=1 (ctest -L nvcc does)";
  const char* env = std::getenv("NVCC");
  std::string nvcc = env ? env : "/usr/local/cuda/bin/nvcc";
  if (std::system((nvcc + " --version > /dev/null 2>&1").c_str()) != 0) GTEST_SKIP() << "no nvcc at " << nvcc;
  std::vector<ElementwiseChain> chains = {bias_gelu(DType::f16), bias_gelu(DType::bf16), bias_gelu(DType::f32),
                                          new_float_ops(DType::f16), new_int_ops(DType::u8), new_int_ops(DType::i64)};
  {
    ElementwiseChain ch;
    ch.inputs = {DType::f16, DType::boolean, DType::i64};
    const int x = ch.input(0), m = ch.input(1), i = ch.input(2);
    const int c = ch.cast(i, DType::f16);
    const int w = ch.where(m, ch.unary(EwOp::clip, x, -1.f, 1.f), ch.binary(EwOp::pow, c, x));
    const int s = ch.unary(EwOp::hard_sigmoid, ch.unary(EwOp::leaky_relu, w, 0.1f), 0.2f, 0.5f);
    ch.outputs = {s, ch.binary(EwOp::greater_equal, s, x), ch.cast(s, DType::i32)};
    chains.push_back(ch);
  }
  // One translation unit per kernel with its host launcher (the PDL launch), as the artifact
  // builder compiles them.
  const std::string dir = SABRE_BINARY_DIR "/native_codegen_test";
  std::system(("mkdir -p " + dir).c_str());
  for (size_t k = 0; k < chains.size(); ++k) {
    const std::string cu = dir + "/k" + std::to_string(k) + ".cu";
    std::ofstream(cu) << codegen::elementwise_library_source({kernel_name(chains[k]), generate_elementwise_kernel(chains[k])});
  }
  std::string cmd = nvcc + " -std=c++17 -O3 -arch=sm_90 -Xptxas -warn-spills -c";
  for (size_t k = 0; k < chains.size(); ++k) cmd += " " + dir + "/k" + std::to_string(k) + ".cu";
  cmd = "cd " + dir + " && " + cmd + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  const int rc = pclose(p);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out.find("spill"), std::string::npos) << out;
}

}  // namespace
}  // namespace sabre::native

// cuBLASLt kernels as data (backends/cublaslt/lt_spec.h): names, their round trip, the emitted
// kernel library, and which tuning-DB rows deploy as one (tune/profiler.h, deployable_kernel).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cublaslt/lt_spec.h"
#include "tune/profiler.h"

namespace {
using namespace sabre::cublaslt_backend;
namespace cb = sabre::cutlass_backend;

LtKernelSpec bias_res() {
  LtKernelSpec s;
  s.spec = {{cb::Elem::f16, cb::Elem::f16, cb::Layout::tn}, {cb::Act::none, true, cb::Residual::before_act}};
  s.algo = {66, 20, 8, 1, 0, 0, 0, 0, 0};
  return s;
}

TEST(LtKernelName, SaysTheSpecAndTheAlgorithmAndRoundTrips) {
  LtKernelSpec s = bias_res();
  EXPECT_EQ(lt_kernel_name(s), "cublaslt_tn_f16_f16_f32_bias_res_algo66_t20_s8_k1_r0_w0_o0_i0_c0");
  EXPECT_EQ(parse_lt_kernel_name(lt_kernel_name(s)), s);
  s.spec = {{cb::Elem::bf16, cb::Elem::bf16, cb::Layout::tt}, {cb::Act::gelu_tanh, true, cb::Residual::none}};
  s.algo = {31, 18, 22, 4, 2, 1, 3, 5, 7};
  EXPECT_EQ(lt_kernel_name(s), "cublaslt_tt_bf16_bf16_f32_bias_gelutanh_algo31_t18_s22_k4_r2_w1_o3_i5_c7");
  EXPECT_EQ(parse_lt_kernel_name(lt_kernel_name(s)), s);
}

TEST(LtKernelName, RefusesWhatNoKernelIsNamed) {
  const std::string good = lt_kernel_name(bias_res());
  EXPECT_TRUE(parse_lt_kernel_name(good));
  for (const std::string& bad : std::vector<std::string>{
           std::string("cublaslt_tn_f16_f16_f32_bias_res"),                                // a candidate's spec, no algorithm
           std::string("cublaslt_tn_f16_f16_f32_bias_res#algo0"),                          // a tuning candidate
           std::string("cublaslt_tn_f16_f16_f32_bias_res_algo66_t20_s8_k1_r0_w0_o0_i0"),   // a field missing
           std::string("cublaslt_tn_f16_f16_f32_bias_res_algo66_t20_s8_k1_r0_w0_o0_i0_c0_x1"),  // one too many
           std::string("cublaslt_tn_f16_f16_f32_bias_res_algo066_t20_s8_k1_r0_w0_o0_i0_c0"),    // leading zero
           std::string("cublaslt_tn_f16_f16_f32_bias_res_algo66_t20_s8_k-1_r0_w0_o0_i0_c0"),    // negative
           std::string("cublaslt_tn_f16_f16_f32_bias_res_algo66_s8_t20_k1_r0_w0_o0_i0_c0"),     // out of order
           std::string("cublaslt_tn_f16_f16_f32_bias_rez_algo66_t20_s8_k1_r0_w0_o0_i0_c0"),     // no such epilogue
           std::string("sm90_ws_coop_tn_f16_f16_f32_128x128x64_c1x1_a8_bias_res"),
       })
    EXPECT_FALSE(parse_lt_kernel_name(bad)) << bad;
}

TEST(LtKernelEmitter, FixesTheAlgorithmAndExportsTheKernelAbi) {
  const LtKernelSpec s = bias_res();
  const std::string n = lt_kernel_name(s);
  const std::string src = emit_lt_kernel(s);
  for (const std::string& part : std::vector<std::string>{
           "const sabre_lt::Problem kProblem = {CUDA_R_16F, CUDA_R_16F, true, CUBLASLT_EPILOGUE_BIAS, true, true};",
           "const sabre_lt::AlgoConfig kAlgo = {66, 20u, 8u, 1, 0u, 0u, 0u, 0, 0};",
           "struct Matmul {",                  // lt_matmul.h pasted in: the tuner's own call
           "cublasLtMatmulAlgoCheck(",         // the fixed algorithm checked at each shape
           "pr->mm.heuristics(t.handle, 0, 1", // and cuBLASLt's own first choice where it refuses it
           "ThreadState& t = t_states[device];", // a handle per device: one thread may serve several GPUs
           "int " + n + "_can_implement(const sabre_gemm_args* p)",
           "size_t " + n + "_workspace_size(const sabre_gemm_args* p)",
           "int " + n + "_run(const sabre_gemm_args* p, sabre_stream_t stream)",
           "sabre_kernel_registry(int* count, int* abi_version)",
       })
    EXPECT_NE(src.find(part), std::string::npos) << part;
  EXPECT_EQ(src.find("#pragma once"), std::string::npos);
  // relu with the residual before it; a tt layout.
  LtKernelSpec r = s;
  r.spec = {{cb::Elem::bf16, cb::Elem::bf16, cb::Layout::tt}, {cb::Act::relu, true, cb::Residual::before_act}};
  EXPECT_NE(emit_lt_kernel(r).find("{CUDA_R_16BF, CUDA_R_16BF, false, CUBLASLT_EPILOGUE_RELU_BIAS, true, true}"),
            std::string::npos);
  // What cuBLASLt cannot compute is refused, not emitted.
  LtKernelSpec erf = s;
  erf.spec.epi.act = cb::Act::gelu_erf;
  EXPECT_THROW(emit_lt_kernel(erf), std::invalid_argument);
  LtKernelSpec after = s;
  after.spec.epi = {cb::Act::relu, true, cb::Residual::after_act};
  EXPECT_THROW(emit_lt_kernel(after), std::invalid_argument);
}

TEST(DeployableKernel, CutlassNamesThemselvesCublasltOnlyWithItsAlgorithm) {
  using sabre::tune::deployable_kernel;
  using sabre::tune::Measurement;
  using sabre::tune::Status;
  const std::string cutlass = "sm90_ws_coop_tn_f16_f16_f32_128x128x64_c1x1_a8_bias_res";
  EXPECT_EQ(deployable_kernel({"w", cutlass, Status::ok, 10, 0, ""}), cutlass);
  const std::string lt = lt_kernel_name(bias_res());
  const std::string cand = "cublaslt_tn_f16_f16_f32_bias_res#algo0";
  EXPECT_EQ(deployable_kernel({"w", cand, Status::ok, 9, 0, std::string(sabre::tune::kDeployPrefix) + lt}), lt);
  EXPECT_FALSE(deployable_kernel({"w", cand, Status::ok, 9, 0, ""}));  // measured before deploying existed
  EXPECT_FALSE(deployable_kernel({"w", cand, Status::ok, 9, 0, "deploy not_a_kernel"}));
  EXPECT_FALSE(deployable_kernel({"w", "something_else", Status::ok, 9, 0, "deploy " + lt}));
}

}  // namespace

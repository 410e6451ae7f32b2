// The CPU interpreter of runtime plans the codegen tests check lowerings with (host loops with each
// step op's semantics from docs/RUNTIME.md, values rounded to each tensor's dtype), and the helpers
// the plan tests share: lower a graph and compare the interpreted plan with the reference executor.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "codegen/compile.h"
#include "codegen/lower.h"
#include "ir/graph.h"
#include "runtime/plan.h"

namespace sabre::plan_interp {

// A step's params as the plan writes them; kept alive for the whole test run, so pointers into
// them stay valid.
const json::Value& pj(const runtime::Step& s);

struct Buf {
  std::vector<int64_t> dims;
  std::vector<double> v;
};

class Interp {
 public:
  Interp(const runtime::Plan& p, const std::vector<uint8_t>& w) : p_(p), w_(w), bufs_(p.tensors.size()) {}

  std::vector<Buf> run(const std::vector<Buf>& inputs);

 private:
  int64_t dim(const json::Value* v) const;
  std::vector<int64_t> dims_list(const json::Value* v) const;
  Buf& in(const runtime::Step& s, size_t i) { return bufs_.at(s.inputs.at(i)); }
  Buf& out(const runtime::Step& s, size_t i = 0) { return bufs_.at(s.outputs.at(i)); }
  ir::DType dt(int t) const { return p_.tensors[t].dtype; }
  void finish(const runtime::Step& s);
  void step(const runtime::Step& s);
  void elementwise(const runtime::Step& s);
  void softmax(const runtime::Step& s);
  void layernorm(const runtime::Step& s);
  // The sum of each term's table row (ids read at offset + sum_i c_i * strides[i]; negative ids
  // count from the end, ids outside the table add zeros), then as layernorm.
  void embed_layernorm(const runtime::Step& s);
  void gemm(const runtime::Step& s);
  // The epilogue after the accumulation, tokens in order (kernel_spec.h spelling, as gemm steps).
  static double epilogue(const std::string& epi, double v, double bias, double res);
  // kernel_abi.h sabre_conv_args: X [n,h,w,c], filter [k,r,s,c/groups], Y and R [n,p,q,k].
  void conv(const runtime::Step& s);
  // native::stem_conv (stem_conv.h): x [n,c,h,w] NCHW, w [k, cols] column stem_conv_column(r, s, c), y
  // [n,p,q,k] NHWC; bias, then the clamp ([min, max], null unbounded, as depthwise_conv's).
  void stem_conv(const runtime::Step& s);
  void pool2d(const runtime::Step& s);
  const runtime::Plan& p_;
  const std::vector<uint8_t>& w_;
  std::vector<Buf> bufs_;
  std::map<std::string, int64_t> dims_;
};

std::string model_path(const std::string& name);

// A stand-in for the conv kernel picker: the CUTLASS conv naming, one tile for every problem.
std::string test_pick_conv(const codegen::ConvProblem& p);

// The plan `original` lowers to (canonicalize, partition, lower), run by the interpreter at
// `dims`, against the reference executor on `original`: relative L2 error per output.
// pick_conv unset: test_pick_conv.
void check_graph(const std::string& name, const ir::Graph& original, ir::DType dtype, double tol,
                 codegen::Lowered* lowered_out = nullptr, bool fuse_attention = false,
                 codegen::Stem stem = codegen::Stem::im2col, bool pointwise_gemm = true,
                 const codegen::ConvKernelPicker& pick_conv = nullptr);

void check_model(const std::string& name, ir::DType dtype, double tol, bool fuse_attention = false,
                 codegen::Lowered* lowered_out = nullptr);

int count_steps(const runtime::Plan& p, const std::string& op);
ir::Value* random_const(ir::Graph& g, const std::string& name, std::vector<int64_t> dims, double scale, std::mt19937& rng);
// The one nchw_to_nhwc step of a plan (a failure when there is not exactly one).
const runtime::Step* only_nchw_to_nhwc(const runtime::Plan& p);
// The i-th conv (or other `op`) step of a plan (the stem's convs run in graph order: 0 the stem, 1 conv2).
const runtime::Step* conv_step(const runtime::Plan& p, int i, const std::string& op = "conv");
std::string kernel_of(const runtime::Step& s);
int64_t num_param(const runtime::Step& s, const char* k);
const runtime::Step* only_step(const runtime::Plan& p, const std::string& op);

}  // namespace sabre::plan_interp

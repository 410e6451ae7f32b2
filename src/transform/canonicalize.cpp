#include "transform/canonicalize.h"

#include <cstdio>
#include <cstdlib>

#include "ir/infer.h"
#include "ir/printer.h"
#include "transform/conv1d_as_conv2d.h"
#include "transform/fold_batchnorm.h"
#include "transform/fold_constants.h"
#include "transform/fold_shapes.h"
#include "transform/fuse_gelu.h"
#include "transform/fuse_layernorm.h"
#include "transform/layout_weights.h"
#include "transform/mark_gemm_bias.h"
#include "transform/merge_qkv.h"
#include "transform/simplify_masks.h"
#include "transform/unflatten_gemm.h"

namespace sabre::transform {

void register_ops() { register_matmul_trans_b_op(); }

ir::Graph canonicalize(ir::Graph g, const PassOptions& opts) {
  register_ops();
  const char* env = std::getenv("SABRE_DUMP_IR");
  const bool dump = opts.dump || opts.dump_to || (env && std::string(env) == "1");
  auto step = [&](const char* name, ir::Graph (*pass)(ir::Graph)) {
    g = pass(std::move(g));
    if (!dump) return;
    if (opts.dump_to) {
      opts.dump_to(name, g);
    } else {
      std::fprintf(stderr, "// after %s\n%s\n", name, ir::print(g).c_str());
    }
  };
  step("fold_shapes", fold_shapes);  // the import leaves shape subgraphs computed
  step("fold_constants", fold_constants);
  step("fold_shapes", fold_shapes);
  step("simplify_masks", simplify_masks);
  step("unflatten_gemm", unflatten_gemm);
  step("fuse_gelu", fuse_gelu);
  step("fuse_layernorm", fuse_layernorm);
  step("fold_batchnorm", fold_batchnorm);
  step("conv1d_as_conv2d", conv1d_as_conv2d);
  step("fold_constants", fold_constants);  // what the fusions left constant (e.g. Transpose of a weight)
  if (opts.regroup) {
    const RegroupOptions ro = *opts.regroup;
    g = regroup_convs(std::move(g), ro);
    if (dump) {
      if (opts.dump_to) opts.dump_to("regroup_convs", g);
      else std::fprintf(stderr, "// after regroup_convs\n%s\n", ir::print(g).c_str());
    }
  }
  step("layout_weights", layout_weights);
  step("mark_gemm_bias", mark_gemm_bias);
  if (opts.merge_qkv) step("merge_qkv", merge_qkv);
  ir::infer_types(g);
  return g;
}

}  // namespace sabre::transform

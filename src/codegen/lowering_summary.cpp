#include "codegen/lowering_summary.h"

#include "codegen/compile.h"
#include "tune/select.h"

namespace sabre::codegen {

LoweringSummary lowering_summary(const ir::Graph& partitioned, LowerOptions lo) {
  lo.pick = [](const tune::GemmProblem& p) { return tune::pick_kernels(p, tune::PickOptions{}); };
  lo.pick_conv = [](const ConvProblem& p) { return analytic_conv_kernel(p, 90); };
  lo.weights = false;
  lo.dump_after = "none";
  LoweringSummary out;
  try {
    Lowered low = lower(partitioned, lo);
    out.layout = "nothing runs NHWC (no conv regions): no transposes";
    for (const std::string& n : low.notes)
      if (n.rfind("NHWC inside conv regions", 0) == 0) out.layout = n;
    for (const PassReport& p : low.passes)
      for (const std::string& r : p.refused) {
        // PassReport::refused is "node: reason": split at the first ": ", as reasons hold ": " too.
        const size_t cut = r.find(": ");
        out.not_fired.push_back({p.name, r.substr(0, cut), cut == std::string::npos ? "" : r.substr(cut + 2)});
      }
  } catch (const UnsupportedError& e) {
    std::string what = e.what();
    out.layout = "not lowered: " + what.substr(0, what.find('\n'));
  }
  return out;
}

}  // namespace sabre::codegen

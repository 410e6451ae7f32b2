// Emitting GEMM regions (sabre.Composite gemm / batched_gemm) as "gemm" steps with their dispatch
// tables.
#include "codegen/passes/emit.h"

#include "backends/cutlass/patterns.h"

namespace sabre::codegen::passes {
namespace {

Dim attr_dim(const Node* n, const std::string& k) {
  const auto& v = n->attrs().at(k);
  if (auto i = std::get_if<int64_t>(&v)) return Dim(*i);
  if (auto s = std::get_if<std::string>(&v))
    if (auto d = Dim::parse(*s)) return *d;
  throw std::logic_error("lower: Composite attribute '" + k + "' is not a dim (invariant: docs/IR.md Composite attrs)");
}

}  // namespace

// A gemm step's params for D[m,n] = epilogue(A[m,k]·B + bias, residual) (docs/RUNTIME.md): dims,
// leading dimensions, dtype, layout and the dispatch table(s) LowerOptions::pick gives the problem;
// `p` brings the batch strides. Throws UnsupportedError when no kernel fits.
runtime::GemmParams gemm_params(LowerContext& cx, const Node* n, runtime::GemmParams p, const Dim& m, const Dim& nn,
                                const Dim& k, const Dim& batch, const std::string& layout, const std::string& epilogue,
                                bool residual) {
  p.m = pdim(m);
  p.n = pdim(nn);
  p.k = pdim(k);
  p.batch = pdim(batch);
  p.lda = pdim(k);
  p.ldb = pdim(layout == "tn" ? k : nn);
  p.ldd = pdim(nn);
  p.ldr = pdim(nn);
  p.alpha = 1;
  p.beta = residual ? 1 : 0;
  const std::string dt(ir::name(cx.o.dtype));
  p.dtype = dt;
  p.layout = layout;
  p.epilogue = epilogue;

  // The problem the picker sees: symbolic N/K/batch at their largest value; alignment from the
  // extents (a symbolic contiguous extent can be anything, so it allows only 1).
  tune::GemmProblem prob;
  prob.dtype = dt;
  prob.layout = layout;
  prob.epilogue = epilogue;
  prob.n = cx.eval_hi(nn);
  prob.k = cx.eval_hi(k);
  prob.batch = cx.eval_hi(batch);
  prob.m_min = cx.eval_lo(m);
  prob.m_max = cx.eval_hi(m);
  const int static_align = cutlass_backend::static_alignment(cx.o.dtype, {{"N", nn}, {"K", k}});
  const int align = nn.is_static() && k.is_static() ? static_align : 1;
  prob.alignment = align;
  if (prob.n <= 0 || prob.k <= 0 || prob.m_max <= 0 || prob.batch <= 0)
    throw UnsupportedError(where(n) + ": GEMM dims do not evaluate over the symbol ranges");
  std::vector<tune::DispatchEntry> table;
  try {
    table = cx.o.pick(prob);
  } catch (const std::invalid_argument& e) {
    throw UnsupportedError(where(n) + ": no GEMM kernel for " + tune::workload_key(prob, prob.m_max) + ": " + e.what());
  }
  if (table.empty()) throw UnsupportedError(where(n) + ": the kernel picker returned no kernel");
  auto dispatch = [&](const std::vector<tune::DispatchEntry>& t) {
    runtime::DispatchTable disp;
    for (size_t i = 0; i < t.size(); ++i) {
      const auto& e = t[i];
      int64_t max_m = i + 1 == t.size() ? -1 : e.max_m;  // the last entry covers any m
      disp.push_back({max_m, e.kernel});
      if (!cx.gemm_seen.count(e.kernel)) {
        cx.gemm_seen.insert(e.kernel);
        cx.out.gemm_kernels.push_back(e.kernel);
      }
    }
    return disp;
  };
  p.dispatch = dispatch(table);
  // A symbolic N or K (attention's sequence length) forces alignment-1 kernels, slow on every
  // length; add a second table the runtime takes when the actual extents are aligned.
  if (align < static_align) {
    tune::GemmProblem aligned = prob;
    aligned.alignment = static_align;
    try {
      auto t = cx.o.pick(aligned);
      if (!t.empty()) {
        p.dispatch_aligned = dispatch(t);
        p.aligned_to = static_align;
      }
    } catch (const std::invalid_argument&) {
      // no kernel for the aligned case: the alignment-1 table serves every length
    }
  }
  return p;
}

void emit_composite(LowerContext& cx, Node* n) {
  const std::string kind = n->attr_string("kind", "");
  if (kind == "conv2d_fprop") return emit_conv(cx, n);
  if (kind != "gemm" && kind != "batched_gemm")
    throw UnsupportedError(where(n) + ": unknown Composite kind '" + kind + "'");
  std::map<std::string, Value*> role = roles_of(n);
  Value* A = role["A"];
  Value* B = role["B"];
  if (!A || !B) throw std::logic_error("lower: Composite " + n->name() + " lacks an A or B role (invariant: docs/IR.md)");
  const std::string layout = n->attr_string("layout", "tn");
  const std::string epilogue = n->attr_string("epilogue", "linear");
  const Value* D = n->output(0);
  const auto& dsh = D->shape();
  Dim m, nn = attr_dim(n, "n"), k = attr_dim(n, "k"), batch(1);
  runtime::GemmParams p;
  if (kind == "gemm") {
    m = product(dsh, 0, dsh.size() - 1);
    p.stride_a = p.stride_b = p.stride_d = p.stride_r = ParamDim::text("0");
  } else {
    m = attr_dim(n, "m");
    batch = attr_dim(n, "batch");
    auto stride = [&](const Value* v, const Dim& mat) -> Dim {
      const auto& s = v->shape();
      Dim lead = product(s, 0, s.size() - 2);
      if (lead == Dim(1)) return Dim(0);
      if (lead == batch) return mat;
      throw UnsupportedError(where(n) + ": operand '" + v->name() + "' broadcasts over part of the batch dims " +
                             ir::str(s));
    };
    p.stride_a = pdim(stride(A, m * k));
    p.stride_b = pdim(stride(B, k * nn));
    p.stride_d = pdim(m * nn);
    p.stride_r = pdim(role.count("residual") && role["residual"] ? stride(role["residual"], m * nn) : Dim(0));
  }
  p = gemm_params(cx, n, std::move(p), m, nn, k, batch, layout, epilogue, role.count("residual") && role["residual"]);
  p.pattern = n->attr_string("pattern", "");
  if (auto it = cx.row_gather.find(n); it != cx.row_gather.end()) {
    const auto& xs = it->second.x->shape();
    p.lda = pdim(xs[1] * k);
    p.a_offset = pdim(Dim(it->second.row) * k);
    A = it->second.x;
  }
  std::vector<int> ins{cx.tensor(A), cx.tensor(B), cx.tensor(role.count("bias") ? role["bias"] : nullptr),
                       cx.tensor(role.count("residual") ? role["residual"] : nullptr)};
  cx.step(n->name(), ins, {cx.define(D)}, std::move(p));
}

}  // namespace sabre::codegen::passes

// Shape inference for losses, quantization, ConvTranspose, the remaining nn ops (LRN, Det, ...)
// and sabre.Composite.
// Tests: tests/unit/infer_index_test.cpp
#include <algorithm>
#include <cctype>

#include "ir/infer_internal.h"

namespace sabre::ir::infer_detail {
namespace {

// A partitioned region (partition/partitioner.h): its body re-inferred with the node's input
// types, so a changed symbol binding flows through.
void composite(Node& n) {
  const auto& body = n.attr_graph("body");
  if (!body || body->inputs().size() != n.num_inputs() || body->outputs().size() != n.num_outputs())
    throw IrError("Composite '" + n.name() + "': body inputs/outputs must match the node's");
  Graph b = body->clone();
  for (size_t i = 0; i < n.num_inputs(); ++i)
    if (n.input(i) && n.input(i)->type().known) b.inputs()[i]->set_type(n.input(i)->type());
  infer_types(b);
  for (size_t i = 0; i < n.num_outputs(); ++i) n.output(i)->set_type(b.outputs()[i]->type());
}

void loss(Node& n) {
  Value* x = in(n, 0);
  Value* t = in(n, 1);
  if (!is_float(x->dtype())) fail(n, "input must be float");
  if (is_float(t->dtype()) || t->dtype() == DType::boolean) fail(n, "target must be integers");
  const std::string red = n.attr_string("reduction", "mean");
  if (red != "none" && red != "sum" && red != "mean") fail(n, "reduction must be none, sum or mean, got '" + red + "'");
  if (x->shape().size() < 2 || t->shape().size() + 1 != x->shape().size())
    fail(n, "input must be [N, C, d...] and target [N, d...], got " + str(x->shape()) + " and " + str(t->shape()));
  set_out(n, 0, x->dtype(), red == "none" ? t->shape() : Shape{});
  set_out(n, 1, x->dtype(), x->shape());  // SoftmaxCrossEntropyLoss's log_prob
}

void quantize(Node& n) {
  Value* x = in(n, 0);
  in(n, 1);
  DType d = DType::u8;
  if (Value* zp = opt_in(n, 2)) d = zp->dtype();
  else if (n.has_attr("output_dtype")) {
    auto p = parse_dtype(n.attr_string("output_dtype"));
    if (!p) fail(n, "unknown output_dtype '" + n.attr_string("output_dtype") + "'");
    d = *p;
  }
  if (d != DType::u8 && d != DType::i8 && d != DType::i32)
    throw ShapeUnsupported("node '" + n.name() + "' (QuantizeLinear): quantizing to " + std::string(name(d)) +
                           " is not supported (u8, i8, i32)");
  set_out(n, 0, d, x->shape());
}

void dequantize(Node& n) {
  Value* x = in(n, 0);
  Value* s = in(n, 1);
  if (is_float(x->dtype())) fail(n, "input must be a quantized integer tensor");
  set_out(n, 0, s->dtype(), x->shape());
}

void dynamic_quantize(Node& n) {
  Value* x = in(n, 0);
  if (x->dtype() != DType::f32) fail(n, "input must be f32");
  set_out(n, 0, DType::u8, x->shape());
  set_out(n, 1, DType::f32, {});
  set_out(n, 2, DType::u8, {});
}

void same_shape(Node& n) {
  Value* x = in(n, 0);
  set_out(n, 0, x->dtype(), x->shape());
}

void det(Node& n) {
  Value* x = in(n, 0);
  const Shape& s = x->shape();
  if (s.size() < 2) fail(n, "input must be [..., M, M]");
  unify(n, s[s.size() - 1], s[s.size() - 2], "matrix dims");
  set_out(n, 0, x->dtype(), Shape(s.begin(), s.end() - 2));
}

void conv_transpose(Node& n) {
  Value* x = in(n, 0);
  Value* w = in(n, 1);
  const Shape& xs = x->shape();
  const Shape& ws = w->shape();
  if (xs.size() < 3 || ws.size() != xs.size()) fail(n, "X must be [N, C, d...] and W [C, M/group, k...] of the same rank");
  const size_t sp = xs.size() - 2;
  const int64_t group = n.attr_int("group", 1);
  if (group < 1) fail(n, "group must be positive");
  Shape out = {xs[0], ws[1] * Dim(group)};
  auto strides = n.attr_ints("strides", std::vector<int64_t>(sp, 1)), dil = n.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  auto outpad = n.attr_ints("output_padding", std::vector<int64_t>(sp, 0));
  auto pads = n.attr_ints("pads", {}), oshape = n.attr_ints("output_shape", {});
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  if (oshape.size() == xs.size()) oshape.erase(oshape.begin(), oshape.begin() + 2);
  if (strides.size() != sp || dil.size() != sp || outpad.size() != sp || (!pads.empty() && pads.size() != 2 * sp) ||
      (!oshape.empty() && oshape.size() != sp))
    fail(n, "strides, dilations, output_padding, pads and output_shape need one entry per spatial axis (pads two)");
  for (size_t i = 0; i < sp; ++i) {
    const Dim& d = xs[i + 2];
    const Dim& k = ws[i + 2];
    if (!oshape.empty()) {
      out.push_back(checked_dim(n, oshape[i], "output_shape"));
    } else if (pads.empty() && (ap == "SAME_UPPER" || ap == "SAME_LOWER")) {
      out.push_back(d * Dim(strides[i]));
    } else if (d.is_static() && k.is_static()) {
      const int64_t pb = pads.empty() ? 0 : pads[i] + pads[i + sp];
      out.push_back(checked_dim(n, strides[i] * (d.value() - 1) + outpad[i] + (k.value() - 1) * dil[i] + 1 - pb, "output size"));
    } else {
      out.push_back(unknown_dim(n, 0, i + 2));
    }
  }
  set_out(n, 0, x->dtype(), out);
}

int einsum_label(char c) { return std::islower(static_cast<unsigned char>(c)) ? c - 'a' : 26 + (c - 'A'); }

// Output dims of an Einsum: labels as in the reference (letters 0..51, ellipsis dims 52+ from the right).
void einsum(Node& n) {
  std::string eq;
  for (char c : n.attr_string("equation"))
    if (c != ' ') eq += c;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::map<int, Dim> size;
  std::map<int, int> count;
  int64_t max_ell = 0;
  size_t k = 0;
  for (size_t b = 0;; ++k) {
    size_t e = lhs.find(',', b);
    const std::string term = lhs.substr(b, e == std::string::npos ? std::string::npos : e - b);
    Value* x = in(n, k);
    const Shape& s = x->shape();
    int64_t letters = 0;
    for (char c : term)
      if (std::isalpha(static_cast<unsigned char>(c))) ++letters;
      else if (c != '.') fail(n, "equation term '" + term + "' has a character that is not a letter");
    const size_t dots = term.find("...");
    const int64_t ell = dots == std::string::npos ? 0 : static_cast<int64_t>(s.size()) - letters;
    if (ell < 0 || ell > 11 || (dots == std::string::npos && letters != static_cast<int64_t>(s.size())))
      fail(n, "equation term '" + term + "' does not match input " + std::to_string(k) + " " + str(s));
    max_ell = std::max(max_ell, ell);
    size_t d = 0;
    for (size_t i = 0; i < term.size(); ++i) {
      std::vector<int> ls;
      if (i == dots) {
        for (int64_t q = ell; q > 0; --q) ls.push_back(52 + static_cast<int>(q - 1));
        i += 2;
      } else {
        if (!std::isalpha(static_cast<unsigned char>(term[i]))) fail(n, "equation term '" + term + "' has a '.' outside one '...'");
        ls.push_back(einsum_label(term[i]));
      }
      for (int l : ls) {
        ++count[l];
        auto it = size.find(l);
        if (it == size.end() || it->second == Dim(1)) size[l] = s[d];
        else if (s[d] != Dim(1)) size[l] = unify(n, it->second, s[d], "sizes of one label");
        ++d;
      }
    }
    if (e == std::string::npos) break;
    b = e + 1;
  }
  if (k + 1 != n.num_inputs()) fail(n, "the equation's terms and the inputs differ in number");
  Shape out;
  for (int64_t q = max_ell; q > 0; --q) out.push_back(size[52 + static_cast<int>(q - 1)]);
  if (arrow != std::string::npos) {
    const std::string rhs = eq.substr(arrow + 2);
    out.clear();
    for (size_t i = 0; i < rhs.size(); ++i) {
      if (rhs.compare(i, 3, "...") == 0) {
        for (int64_t q = max_ell; q > 0; --q) out.push_back(size[52 + static_cast<int>(q - 1)]);
        i += 2;
      } else if (auto it = size.find(einsum_label(rhs[i])); it != size.end() && std::isalpha(static_cast<unsigned char>(rhs[i]))) {
        out.push_back(it->second);
      } else {
        fail(n, std::string("output label '") + rhs[i] + "' is not in any input");
      }
    }
  } else {
    for (int l : {26, 0})
      for (int j = l; j < l + 26; ++j)
        if (count[j] == 1) out.push_back(size[j]);
  }
  set_out(n, 0, in(n, 0)->dtype(), out);
}

void window(Node& n) {
  Value* s = in(n, 0);
  auto dt = parse_dtype(n.attr_string("output_datatype", "f32"));
  if (!dt) fail(n, "unknown output_datatype");
  Dim d = unknown_dim(n, 0, 0);
  if (auto k = known_ints(s); k && k->size() == 1) d = checked_dim(n, (*k)[0], "size");
  else if (s->is_constant() && s->constant().numel() == 1) d = checked_dim(n, s->constant().get_i64(0), "size");
  set_out(n, 0, *dt, {d});
}

// [dft_length / 2 + 1, num_mel_bins], each dim known where its scalar operand is.
void mel_weight_matrix(Node& n) {
  for (size_t i = 0; i < 5; ++i) {
    Value* v = in(n, i);
    if (list_len(v->shape()) != 1) fail(n, "input " + std::to_string(i) + " must be a scalar, got " + str(v->shape()));
    if (i < 3 ? !is_int(v->dtype()) : !is_float(v->dtype()))
      fail(n, std::string(i < 3 ? "num_mel_bins, dft_length and sample_rate must be integers"
                                : "lower_edge_hertz and upper_edge_hertz must be floats"));
  }
  auto dt = parse_dtype(n.attr_string("output_datatype", "f32"));
  if (!dt) fail(n, "unknown output_datatype");
  auto value = [&](size_t i) -> std::optional<int64_t> {
    Value* v = in(n, i);
    if (auto k = known_ints(v); k && k->size() == 1) return (*k)[0];
    if (v->is_constant() && v->constant().numel() == 1) return v->constant().get_i64(0);
    return std::nullopt;
  };
  Dim bins = unknown_dim(n, 0, 0), mels = unknown_dim(n, 0, 1);
  if (auto d = value(1)) bins = checked_dim(n, *d < 0 ? *d : *d / 2 + 1, "dft_length / 2 + 1");
  if (auto m = value(0)) mels = checked_dim(n, *m, "num_mel_bins");
  set_out(n, 0, *dt, {bins, mels});
}

void dropout(Node& n) {
  Value* x = in(n, 0);
  set_out(n, 0, x->dtype(), x->shape());
  set_out(n, 1, DType::boolean, x->shape());
}

void nms(Node& n) {
  in(n, 0);
  in(n, 1);
  set_out(n, 0, DType::i64, {unknown_dim(n, 0, 0), Dim(3)});
}

void grid_sample(Node& n) {
  Value* x = in(n, 0);
  Value* g = in(n, 1);
  const Shape& xs = x->shape();
  const Shape& gs = g->shape();
  if (xs.size() < 3 || gs.size() != xs.size() || gs.back() != Dim(static_cast<int64_t>(xs.size() - 2)))
    fail(n, "X must be [N, C, d...] and grid [N, out..., " + std::to_string(xs.size() >= 2 ? xs.size() - 2 : 0) + "], got " +
                str(xs) + " and " + str(gs));
  Shape out = {unify(n, xs[0], gs[0], "batch dims"), xs[1]};
  out.insert(out.end(), gs.begin() + 1, gs.end() - 1);
  set_out(n, 0, x->dtype(), out);
}

// RNN, GRU, LSTM (layout 0: [seq, batch, ...]; layout 1: [batch, seq, ...]).
void rnn(Node& n) {
  Value* x = in(n, 0);
  Value* w = in(n, 1);
  const Shape& xs = x->shape();
  if (xs.size() != 3 || w->shape().size() != 3) fail(n, "X and W must be 3-D");
  const int64_t H = n.attr_int("hidden_size", -1);
  if (H < 1) fail(n, "hidden_size must be given and positive");
  const bool batch_first = n.attr_int("layout", 0) != 0;
  const Dim dirs = w->shape()[0];
  const Dim S = xs[batch_first ? 1 : 0], B = xs[batch_first ? 0 : 1];
  set_out(n, 0, x->dtype(), batch_first ? Shape{B, S, dirs, Dim(H)} : Shape{S, dirs, B, Dim(H)});
  const Shape state = batch_first ? Shape{B, dirs, Dim(H)} : Shape{dirs, B, Dim(H)};
  set_out(n, 1, x->dtype(), state);
  set_out(n, 2, x->dtype(), state);  // LSTM's Y_c
}

// The shape `op` (MatMul, Conv) gives for `n`'s inputs `idx` and attributes: the integer and
// quantized forms share their float twins' shape rules.
Shape shape_as(const Node& n, const std::string& op, const std::vector<size_t>& idx) {
  Graph g;
  std::vector<Value*> vs;
  for (size_t i : idx) {
    Value* src = in(n, i);
    Value* v = g.add_value("in" + std::to_string(i));
    v->set_type(DType::f32, src->shape());
    vs.push_back(v);
  }
  Node* m = g.add_node(op, vs, 1, n.attrs(), n.name());
  infer_node(*m);
  return m->output(0)->shape();
}

void integer_linear(Node& n) {
  const bool conv = n.op() == "ConvInteger" || n.op() == "QLinearConv";
  const bool qlinear = n.op().rfind("QLinear", 0) == 0;
  Shape s = shape_as(n, conv ? "Conv" : "MatMul", qlinear ? std::vector<size_t>{0, 3} : std::vector<size_t>{0, 1});
  DType d = DType::i32;
  if (qlinear) d = opt_in(n, 7) ? in(n, 7)->dtype() : DType::u8;
  set_out(n, 0, d, s);
}

void max_unpool(Node& n) {
  Value* x = in(n, 0);
  const Shape& xs = x->shape();
  if (xs.size() < 3) fail(n, "X must be [N, C, d...]");
  const size_t sp = xs.size() - 2;
  Shape out = {xs[0], xs[1]};
  const auto kernel = n.attr_ints("kernel_shape", {}), strides = n.attr_ints("strides", std::vector<int64_t>(sp, 1)),
             pads = n.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  if (kernel.size() != sp || strides.size() != sp || pads.size() != 2 * sp)
    fail(n, "kernel_shape and strides need one entry per spatial axis, pads two");
  if (Value* os = opt_in(n, 2)) {
    auto k = known(os);
    Shape s;
    for (size_t i = 0; i < xs.size(); ++i) s.push_back(k && k->size() == xs.size() ? (*k)[i] : unknown_dim(n, 0, i));
    return set_out(n, 0, x->dtype(), s);
  }
  for (size_t d = 0; d < sp; ++d)
    out.push_back(xs[d + 2].is_static()
                      ? checked_dim(n, (xs[d + 2].value() - 1) * strides[d] + kernel[d] - pads[d] - pads[d + sp], "output size")
                      : unknown_dim(n, 0, d + 2));
  set_out(n, 0, x->dtype(), out);
}

void dft(Node& n) {
  Value* x = in(n, 0);
  Shape s = x->shape();
  const int64_t r = static_cast<int64_t>(s.size());
  if (r < 2) fail(n, "input must be [..., signal, 1 or 2]");
  int64_t axis = n.attr_int("axis", n.has_attr("axis") ? 1 : -2);
  if (Value* a = opt_in(n, 2)) {
    auto k = known_ints(a);
    if (!k || k->size() != 1) needs_constant(n, "axis");
    axis = (*k)[0];
  }
  axis = norm_axis(n, axis, r);
  if (axis == r - 1) fail(n, "axis must not be the last (real/imaginary) axis");
  Dim len = s[axis];
  if (Value* l = opt_in(n, 1)) {
    auto k = known_ints(l);
    len = k && k->size() == 1 ? checked_dim(n, (*k)[0], "dft_length") : unknown_dim(n, 0, static_cast<size_t>(axis));
  }
  if (n.attr_int("onesided", 0) != 0)
    len = len.is_static() ? Dim(len.value() / 2 + 1) : unknown_dim(n, 0, static_cast<size_t>(axis));
  s[axis] = len;
  s.back() = Dim(2);
  set_out(n, 0, x->dtype(), s);
}

}  // namespace

void add_extra_ops(Table& t) {
  t[{"", "NegativeLogLikelihoodLoss"}] = loss;
  t[{"", "SoftmaxCrossEntropyLoss"}] = loss;
  t[{"", "QuantizeLinear"}] = quantize;
  t[{"", "DequantizeLinear"}] = dequantize;
  t[{"", "DynamicQuantizeLinear"}] = dynamic_quantize;
  t[{"", "LRN"}] = same_shape;
  t[{"", "MeanVarianceNormalization"}] = same_shape;
  t[{"", "Det"}] = det;
  t[{"", "ConvTranspose"}] = conv_transpose;
  t[{"", "Einsum"}] = einsum;
  for (const char* w : {"HannWindow", "HammingWindow", "BlackmanWindow"}) t[{"", w}] = window;
  t[{"", "MelWeightMatrix"}] = mel_weight_matrix;
  t[{"", "Dropout"}] = dropout;
  t[{"", "NonMaxSuppression"}] = nms;
  t[{"", "GridSample"}] = grid_sample;
  t[{"", "MaxUnpool"}] = max_unpool;
  t[{"", "DFT"}] = dft;
  for (const char* r : {"RNN", "GRU", "LSTM"}) t[{"", r}] = rnn;
  for (const char* q : {"MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv"}) t[{"", q}] = integer_linear;
  t[{"sabre", "Composite"}] = composite;
}

}  // namespace sabre::ir::infer_detail

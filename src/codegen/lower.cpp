// Lowering a partitioned graph to the runtime plan (see lower.h): a driver that runs the passes
// of passes/pass.h in order over one shared LowerContext, dumps the state after the passes asked
// for, and turns every refusal into a note. Step params follow docs/RUNTIME.md.
#include "codegen/lower.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "codegen/passes/pass.h"

namespace sabre::codegen {
namespace {

// The passes to dump after: LowerOptions::dump_after, else $SABRE_DUMP_AFTER.
std::set<std::string> dump_selection(const LowerOptions& o) {
  if (!o.dump_after.empty()) {
    auto v = parse_dump_after(o.dump_after);
    return {v.begin(), v.end()};
  }
  const char* e = std::getenv("SABRE_DUMP_AFTER");
  auto v = parse_dump_after(e ? e : "", "SABRE_DUMP_AFTER");
  return {v.begin(), v.end()};
}

void write_dump(const LowerOptions& o, const std::string& pass, const std::string& text) {
  if (o.dump_sink) return o.dump_sink(pass, text);
  std::string file = o.dump_file;
  if (file.empty())
    if (const char* e = std::getenv("SABRE_DUMP_FILE")) file = e;
  if (file.empty()) {
    std::cerr << text << std::flush;
    return;
  }
  std::ofstream f(file, std::ios::app);
  f << text;
  if (!f) throw std::runtime_error("cannot write the lowering dump to " + file + " (check the path; SABRE_DUMP_FILE)");
}

// One note per (pass, reason): "fuse_attention: at Softmax_1, Softmax_2: attention not fused: head dim 96 ...".
void add_refusal_notes(const std::string& pass, const std::vector<passes::Refusal>& refused,
                       std::vector<std::string>& notes) {
  std::vector<std::pair<std::string, std::vector<std::string>>> by_reason;
  for (const passes::Refusal& r : refused) {
    auto it = std::find_if(by_reason.begin(), by_reason.end(), [&](const auto& e) { return e.first == r.reason; });
    if (it == by_reason.end()) by_reason.push_back({r.reason, {r.node}});
    else it->second.push_back(r.node);
  }
  constexpr size_t kNamed = 4;  // nodes named per note; the rest are counted
  for (const auto& [reason, nodes] : by_reason) {
    std::string at;
    for (size_t i = 0; i < nodes.size() && i < kNamed; ++i) at += (i ? ", " : "") + nodes[i];
    if (nodes.size() > kNamed) at += " and " + std::to_string(nodes.size() - kNamed) + " more";
    notes.push_back(pass + ": at " + at + ": " + reason);
  }
}

}  // namespace

std::vector<std::string> parse_dump_after(const std::string& text, const std::string& what) {
  std::vector<std::string> out;
  if (text.empty() || text == "none") return out;
  std::stringstream ss(text);
  std::string name;
  bool all = false;
  while (std::getline(ss, name, ',')) {
    if (name == "all") {
      all = true;
      continue;
    }
    bool known = false;
    for (const auto& p : passes::lowering_passes()) known = known || p.name == name;
    if (!known)
      throw std::invalid_argument(what + " names '" + name + "', which is no lowering pass; give one or more of " +
                                  passes::pass_names() + " (comma-separated), or all");
    out.push_back(name);
  }
  return all ? lowering_pass_names() : out;
}

std::vector<std::string> lowering_pass_names() {
  std::vector<std::string> v;
  for (const auto& p : passes::lowering_passes()) v.emplace_back(p.name);
  return v;
}

Lowered lower(const ir::Graph& g, const LowerOptions& opts) {
  if (opts.dtype != ir::DType::f16 && opts.dtype != ir::DType::bf16)
    throw std::invalid_argument("compute dtype must be f16 or bf16");
  if (!opts.pick) throw std::logic_error("lower: LowerOptions::pick is required (invariant: a kernel picker is set)");
  const std::set<std::string> dump = dump_selection(opts);
  passes::LowerContext cx(g, opts);
  std::vector<std::string> refusals;
  for (const passes::Pass& p : passes::lowering_passes()) {
    const passes::PassResult r = p.run(cx);
    add_refusal_notes(std::string(p.name), r.refused, refusals);
    PassReport report{std::string(p.name), r.fired, {}, r.skipped};
    for (const passes::Refusal& f : r.refused) report.refused.push_back(f.node + ": " + f.reason);
    cx.out.passes.push_back(std::move(report));
    if (dump.count(std::string(p.name))) write_dump(opts, std::string(p.name), passes::dump(cx, p.name, r));
  }
  cx.out.notes.insert(cx.out.notes.end(), refusals.begin(), refusals.end());
  return std::move(cx.out);
}

std::string_view stem_name(Stem s) {
  switch (s) {
    case Stem::im2col: return "im2col";
    case Stem::conv: return "conv";
    case Stem::direct: return "direct";
  }
  return "?";
}

Stem parse_stem(const std::string& text) {
  for (Stem s : {Stem::im2col, Stem::conv, Stem::direct})
    if (text == stem_name(s)) return s;
  throw std::invalid_argument("--stem '" + text +
                              "': give im2col (an im2col step and a GEMM), conv (the channel-padded conv) or direct "
                              "(one stem_conv kernel reading the NCHW images)");
}

std::pair<int64_t, int64_t> default_range(const std::string& symbol) {
  std::string s = symbol;
  std::transform(s.begin(), s.end(), s.begin(), ::tolower);
  return {1, s.find("batch") != std::string::npos ? kDefaultBatchMax : kDefaultOtherMax};
}

DimRanges parse_dynamic(const std::string& text) {
  const std::string form = " (expected NAME=MIN..MAX[,NAME=MIN..MAX...], e.g. batch=1..256,seq=1..512)";
  DimRanges out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw std::invalid_argument("bad --dynamic entry '" + item + "'" + form);
    std::string name = item.substr(0, eq), range = item.substr(eq + 1);
    auto dots = range.find("..");
    auto num = [&](const std::string& s) {
      if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 12)
        throw std::invalid_argument("bad --dynamic entry '" + item + "': '" + s + "' is not a positive integer" + form);
      return std::stoll(s);
    };
    int64_t lo = num(dots == std::string::npos ? range : range.substr(0, dots));
    int64_t hi = dots == std::string::npos ? lo : num(range.substr(dots + 2));
    if (lo < 1 || hi < lo)
      throw std::invalid_argument("bad --dynamic entry '" + item + "': needs 1 <= MIN <= MAX" + form);
    // Kernels take their dims (and a conv's n·p·q, a GEMM's M) as int32: a larger bound could never run.
    constexpr int64_t kMaxDim = (int64_t(1) << 31) - 1;
    if (hi > kMaxDim)
      throw std::invalid_argument("bad --dynamic entry '" + item + "': MAX " + std::to_string(hi) + " is past " +
                                  std::to_string(kMaxDim) + ", the largest dim the kernels take");
    if (out.count(name)) throw std::invalid_argument("--dynamic names '" + name + "' twice");
    out[name] = {lo, hi};
  }
  if (out.empty()) throw std::invalid_argument("empty --dynamic" + form);
  return out;
}

std::string gpu_route(const ir::Node& n, std::string* why) {
  std::string problem = n.op() == "Conv" ? passes::depthwise_problem(&n) : "";
  if (n.op() == "Conv" && problem.empty())
    return passes::is_depthwise(&n) ? "sabre's native NHWC depthwise kernel (depthwise_conv step)"
                            : "sabre's native NHWC grouped-conv kernel (grouped_conv step)";
  if (why) *why = n.op() == "Conv" && problem != "not grouped" ? problem : "GEMMs and convs have no GPU path outside the regions";
  return "";
}

}  // namespace sabre::codegen

// Where each Conv runs. See conv_routes.h.
#include "codegen/conv_routes.h"

#include "codegen/lower.h"
#include "codegen/passes/context.h"

namespace sabre::codegen {
namespace {

std::string channels(const ir::Dim& d) { return d.str(); }

// A conv region: dense where its Conv has one group, grouped otherwise.
ConvRoute region_route(const ir::Node& region, const ir::Node& conv) {
  const int64_t groups = conv.attr_int("group", 1);
  const std::string pattern = region.attr_string("pattern", "");
  const std::string epi = region.attr_string("epilogue", "linear");
  const ir::Value* w = passes::roles_of(&region)["W"];  // the region's filter, as the model holds it
  // regroup_convs names the filters it widens so.
  const bool regrouped = w && w->name().find(".regrouped") != std::string::npos;
  if (groups == 1)
    return {conv.name(), kRouteCutlassDense,
            "one group" + std::string(regrouped ? " (regroup_convs joined the model's groups; zero taps between them)" : "") +
                ": pattern " + pattern + ", epilogue " + epi};
  std::string why;
  if (w && w->shape().size() == 4)
    why = std::to_string(groups) + " groups of " + channels(w->shape()[1]) + " input and " +
          (w->shape()[0].is_static() ? std::to_string(w->shape()[0].value() / groups) : "?") +
          " output channels (the grouped kernels' multiples): ";
  why += "pattern " + pattern + ", epilogue " + epi;
  if (regrouped)
    why += "; regroup_convs widened narrower groups to this (zero taps between the old groups)";
  return {conv.name(), kRouteCutlassGrouped, why};
}

// A Conv the pattern table left out, with the table's reason.
ConvRoute left_out_route(const ir::Node& conv, const std::string& reason) {
  std::string why;
  const std::string route = gpu_route(conv, &why);
  if (route.empty()) return {conv.name(), kRouteNone, why};
  if (passes::is_depthwise(&conv)) {
    const ir::Dim c = conv.input(0)->shape()[1];
    const bool vec = c.is_static() && c.value() % 8 == 0;
    return {conv.name(), kRouteNativeDepthwise,
            "one input channel and one filter a group (C = " + c.str() + "): " +
                (vec ? "the vector body (C a multiple of 8 halves)" : "the tiled body (C not a multiple of 8)")};
  }
  return {conv.name(), kRouteNativeGrouped, "not taken by CUTLASS: " + reason};
}

}  // namespace

std::vector<ConvRoute> conv_routes(const partition::PartitionReport& rep, const ir::Graph& partitioned) {
  std::vector<ConvRoute> out;
  for (const ir::Node* n : partitioned.topo_order()) {
    if (passes::is_conv_region(n)) {
      if (const auto& body = n->attr_graph("body"))
        for (const ir::Node* b : body->nodes())
          if (b->op() == "Conv") out.push_back(region_route(*n, *b));
      continue;
    }
    if (n->op() != "Conv" || !n->domain().empty()) continue;
    std::string reason = "no pattern in the table has this form";
    for (const auto& lo : rep.left_out)
      if (lo.node == n->name()) reason = lo.reason;
    out.push_back(left_out_route(*n, reason));
  }
  return out;
}

std::string format_conv_routes(const std::vector<ConvRoute>& routes) {
  if (routes.empty()) return "";
  std::string s = "conv routes (" + std::to_string(routes.size()) + "):\n";
  for (const auto& r : routes) s += "  " + r.node + ": " + r.route + " (" + r.why + ")\n";
  return s;
}

}  // namespace sabre::codegen

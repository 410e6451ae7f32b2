// Where each Conv of a model runs on the GPU and why: the route table `sabre partition` prints
// (issue 34: CUTLASS dense or grouped regions, sabre's native tiled grouped kernel, its depthwise
// case, or no GPU path).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "partition/report.h"

namespace sabre::codegen {

// The routes, as the report spells them.
inline constexpr const char* kRouteCutlassDense = "cutlass dense";
inline constexpr const char* kRouteCutlassGrouped = "cutlass grouped";
inline constexpr const char* kRouteNativeGrouped = "native grouped-tiled";
inline constexpr const char* kRouteNativeDepthwise = "native depthwise";
inline constexpr const char* kRouteNone = "none";

struct ConvRoute {
  std::string node;   // the Conv's name
  std::string route;  // one of the kRoute* names
  std::string why;
};

/** One ConvRoute per Conv of `partitioned` (the graph `rep` reports on): those inside conv regions
    by their group count and pattern, the left-out ones by what gpu_route says and the reason the
    pattern table gave, in topological order. Tests: tests/unit/codegen_conv_routes_test.cpp */
std::vector<ConvRoute> conv_routes(const partition::PartitionReport& rep, const ir::Graph& partitioned);

// "conv routes (N):" and one line a conv, for the text report.
std::string format_conv_routes(const std::vector<ConvRoute>& routes);

}  // namespace sabre::codegen

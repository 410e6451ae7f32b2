// Pictures of a profiled run (ExecutionContext::profile, sabre bench --profile): a trace in the
// Chrome trace-event format (Perfetto, chrome://tracing) and a per-op time breakdown as one
// self-contained SVG. Plain functions over a ProfileRecord, so they need no GPU.
// Tests: tests/unit/profile_report_test.cpp
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sabre/session.h"

namespace sabre::runtime {

struct ProfileRecord {
  std::string model;                      // what the pictures are titled with: the artifact's name
  std::string device;                     // the GPU's name, or empty
  std::map<std::string, int64_t> dims;    // the symbolic dims the run was profiled at
  std::vector<StepTime> steps;            // in plan order, each with its per-repeat times
};

// What a step is called in the trace and in Nsight (NVTX): "gemm: /encoder/layer.0/MatMul", or
// the op alone for a step with no node name.
std::string step_label(const std::string& op, const std::string& name);

// The trace: one complete event ("ph":"X") per step per profiled run on the GPU track, named by
// step_label, with the step's kernel, operand and result shapes, bytes and flops in its args; one
// event per run on a track above it. Runs are laid end to end: each step begins where the one
// before it ended (the times are the CUDA events' between steps), and the host's wait between
// runs is left out. A step without per-run times (runs_us empty) gets one event of its median.
nlohmann::ordered_json chrome_trace(const ProfileRecord& r);

// The breakdown: horizontal bars of the median time summed per op kind, then of the `top_steps`
// slowest steps (0: all), each labelled with its time and share of the total.
std::string time_breakdown_svg(const ProfileRecord& r, size_t top_steps = 15);

}  // namespace sabre::runtime

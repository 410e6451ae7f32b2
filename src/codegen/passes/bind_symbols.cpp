// bind_symbols: every symbol of the model's input dims gets its range (LowerOptions::ranges, else
// default_range, with a note); a range for a symbol the model lacks is the user's mistake.
// Tests: tests/unit/codegen_passes_test.cpp
#include <algorithm>

#include "codegen/passes/pass.h"

namespace sabre::codegen::passes {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

}  // namespace

PassResult bind_symbols(LowerContext& cx) {
  std::vector<std::string> names = cx.g.symbols();
  for (const auto& [name, r] : cx.o.ranges)
    if (std::find(names.begin(), names.end(), name) == names.end())
      throw std::invalid_argument("--dynamic names '" + name + "' but the model's inputs have no such dim (they have: " +
                                  join(names) + ")");
  std::vector<std::string> defaulted;
  for (const auto& s : names) {
    runtime::SymbolRange r{s, 1, 1};
    auto it = cx.o.ranges.find(s);
    auto [lo, hi] = it != cx.o.ranges.end() ? it->second : default_range(s);
    if (it == cx.o.ranges.end()) defaulted.push_back(s + "=" + std::to_string(lo) + ".." + std::to_string(hi));
    r.min = lo;
    r.max = hi;
    cx.symbols.push_back(r);
    cx.lo[s] = lo;
    cx.hi[s] = hi;
  }
  if (!defaulted.empty())
    cx.out.notes.push_back("default dim ranges (set them with --dynamic): " + join(defaulted));
  PassResult res;
  res.fired = static_cast<int>(names.size());
  return res;
}

}  // namespace sabre::codegen::passes

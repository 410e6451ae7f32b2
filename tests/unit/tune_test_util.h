// What the tuner's unit tests share (tune_profiler_test.cpp, gpu_pool_test.cpp, tune_cli_test.cpp):
// the GPU environment their fake measurements are recorded under, a GEMM problem over m 1..4096,
// and a shell command's exit status and output.
#pragma once

#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "tune/db.h"
#include "tune/select.h"

namespace sabre::test_util {

inline tune::Environment h200() { return {"NVIDIA H200", 90, "13.0", "4.2.0", "1"}; }

// An f16 tn GEMM of n x k with the epilogue `epi`, tuned for m from 1 to 4096.
inline tune::GemmProblem gemm_problem(int64_t n, int64_t k, const std::string& epi) {
  tune::GemmProblem p;
  p.dtype = "f16";
  p.layout = "tn";
  p.epilogue = epi;
  p.n = n;
  p.k = k;
  p.m_min = 1;
  p.m_max = 4096;
  return p;
}

// Runs a shell command; returns its exit status (-1 where it did not exit) and stdout+stderr.
inline int sh(const std::string& cmd, std::string& out) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  out.clear();
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace sabre::test_util

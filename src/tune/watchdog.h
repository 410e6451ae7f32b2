// Runs a piece of work in a child process under a watchdog.
//
// A GPU kernel that hangs or faults takes its process (and CUDA context) with it; the tuner must
// score it +inf and go on. The child reports through a pipe; the parent waits up to a deadline,
// then kills the child's whole process group. Tests: tests/unit/watchdog_test.cpp
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace sabre::tune {

struct ChildResult {
  enum class Outcome { ok, failed, crashed, hung };
  Outcome outcome = Outcome::crashed;
  std::string payload;  // what the child wrote through `report` (ok and failed)
  std::string detail;   // signal name, exit code, or the deadline that passed
  double wall_s = 0;
};

const char* to_string(ChildResult::Outcome o);

// Forks; the child runs `work(report)` and exits 0 after returning true (ok) or 1 after false
// (failed); `report` sends a payload back (last call wins). A signal or other exit is `crashed`,
// exceeding `timeout` is `hung`. The child must not touch CUDA before the fork in the parent
// (a CUDA context does not survive fork): do all GPU work inside `work`.
ChildResult run_in_child(const std::function<bool(const std::function<void(const std::string&)>& report)>& work,
                         std::chrono::milliseconds timeout);

}  // namespace sabre::tune

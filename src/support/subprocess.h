// The one place sabre starts child processes, and what cleans up after them.
//
// Every child dies with sabre, however sabre ends:
// - a command (nvcc) runs under a small forked supervisor; the command leads a process group of
//   its own, which holds what it starts (cicc, ptxas, the host compiler and linker);
// - the supervisor carries PR_SET_PDEATHSIG, so when sabre dies, even by SIGKILL, it kills the
//   command's whole group and removes the command's temp files; the command carries it too;
// - children that run sabre's own code (fork_child: the tuner's watchdog and compile batch) lead
//   their own group and carry PR_SET_PDEATHSIG=SIGKILL;
// - the CLI's SIGINT/SIGTERM/SIGHUP/SIGPIPE handler stops every live child (supervisors by
//   SIGTERM, so they clean up; forked groups by SIGKILL), removes every registered temp file and
//   exits with 128 + the signal's number.
// Temp files are registered while they exist (TempFiles), so the handler knows what to remove.
// Tests: tests/unit/subprocess_test.cpp, tests/cli/interrupt.py (ctest cli.interrupt)
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace sabre::support {

struct RunOptions {
  // stdout and stderr go to this file (created or truncated); empty: captured into `output`.
  std::string output_file;
  // Removed by the supervisor when sabre dies before the command ends (the normal paths remove
  // them through TempFiles).
  std::vector<std::string> cleanup;
};

// Runs argv (argv[0] searched on PATH) with stdin from /dev/null and waits. Returns its exit
// status, 128 + the signal that ended it, 127 when argv[0] cannot be found or run, -1 when no
// process could be started. Without opts.output_file, stdout and stderr land in *output.
int run_process(const std::vector<std::string>& argv, std::string* output, const RunOptions& opts = {});

// fork() for a child that runs sabre's own code (the tuner's watchdog children): the child leads
// its own group, dies with its parent and forgets its parent's children and temp files. In the
// parent the child's group is registered until reap_child.
pid_t fork_child();
// waitpid (EINTR retried), then forgets the child; returns waitpid's result.
pid_t reap_child(pid_t pid, int* status, int options = 0);
// SIGKILL to the child's whole group.
void kill_child(pid_t pid);

// Temp paths removed by the destructor and by the signal handler; a path that was renamed away
// is simply gone by then.
class TempFiles {
 public:
  TempFiles() = default;
  explicit TempFiles(std::vector<std::string> paths);
  TempFiles(const TempFiles&) = delete;
  TempFiles& operator=(const TempFiles&) = delete;
  ~TempFiles();
  void add(const std::string& path);
  const std::vector<std::string>& paths() const { return paths_; }

 private:
  std::vector<std::string> paths_;
  std::vector<int> slots_;
};

// Installs the termination handler for SIGINT, SIGTERM, SIGHUP and SIGPIPE (the CLI calls this
// first thing). A broken pipe is an error: the output is lost, so the work stops and the exit
// status is 128 + SIGPIPE.
void install_termination_handlers();

// What the handler does (async-signal-safe): SIGTERM every supervisor, SIGKILL every forked
// child's group, remove every registered temp file. Returns the number of children signalled.
int kill_children_and_remove_temps();

// "<host>-<pid>": marks a temp name as this process's, so a later run can tell a dead one's.
std::string temp_tag();
// Removes the files in `dir` whose name holds ".tmp-<this host>-<pid>-" for a pid no longer
// alive (left by a sabre killed with -9). Returns how many it removed.
int sweep_stale_temps(const std::string& dir);

}  // namespace sabre::support

// sabre: an ahead-of-time compiler and runtime for ONNX models on NVIDIA GPUs.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "cli_util.h"
#include "command.h"
#include "support/files.h"
#include "support/subprocess.h"

namespace sabre::cli {

static std::vector<Command>& commands() {
  static std::vector<Command> all;
  return all;
}

bool register_command(Command c) {
  commands().push_back(c);
  return true;
}

static void print_help() {
  std::printf(
      "sabre: compile ONNX models into fast artifacts for NVIDIA GPUs.\n\n"
      "usage: sabre <command> [options]   (sabre <command> --help for its options)\n\ncommands:\n");
  auto cmds = commands();
  std::sort(cmds.begin(), cmds.end(), [](const Command& a, const Command& b) { return std::strcmp(a.name, b.name) < 0; });
  for (const auto& c : cmds) std::printf("  %-12s %s\n", c.name, c.summary);
}

}  // namespace sabre::cli

int main(int argc, char** argv) {
  using namespace sabre::cli;
  // Ctrl-C, kill, a closed terminal or output pipe: stop the compilers and remove temp files.
  sabre::support::install_termination_handlers();
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    print_help();
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      std::fprintf(stderr, "sabre: error: cannot write standard output: %s\n", std::strerror(errno));
      return kExitError;
    }
    return argc < 2 ? kExitUsage : kExitOk;
  }
  for (const auto& c : commands()) {
    if (std::strcmp(c.name, argv[1]) != 0) continue;
    try {
      int rc = c.run(std::vector<std::string>(argv + 2, argv + argc));
      sabre::support::check_stream(stdout, "standard output");
      return rc;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sabre %s: error: %s\n", c.name, describe(e).c_str());
      return kExitError;
    }
  }
  std::fprintf(stderr, "sabre: error: unknown command '%s' (see sabre --help)\n", argv[1]);
  return kExitUsage;
}

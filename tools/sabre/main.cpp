// sabre: an ahead-of-time compiler and runtime for ONNX models on NVIDIA GPUs.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

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
      "usage: sabre <command> [options]   (sabre <command> --help for its options)\n"
      "       sabre --version\n\ncommands:\n");
  auto cmds = commands();
  std::sort(cmds.begin(), cmds.end(), [](const Command& a, const Command& b) { return std::strcmp(a.name, b.name) < 0; });
  for (const auto& c : cmds) std::printf("  %-12s %s\n", c.name, c.summary);
  std::printf("\nShared options: --dim NAME=VALUE, --arch sm_90a, --dtype fp16, -o/--output, -j/--jobs N, --json\n"
              "mean the same in every command (docs/USAGE.md).\n");
}

// "sabre: error: unknown command 'compil'; did you mean 'compile'?"
static std::string unknown_command(const std::string& name) {
  std::string best;
  size_t best_d = std::max<size_t>(3, name.size() / 3 + 1);  // close matches only
  for (const auto& c : commands())
    if (size_t d = edit_distance(name, c.name); d < best_d || (best.empty() && std::string(c.name).rfind(name, 0) == 0 && !name.empty())) {
      best_d = d;
      best = c.name;
    }
  return "unknown command '" + name + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?");
}

static int flushed(int rc) {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "sabre: error: cannot write standard output: %s\n", std::strerror(errno));
    return kExitError;
  }
  return rc;
}

}  // namespace sabre::cli

int main(int argc, char** argv) {
  using namespace sabre::cli;
  // Ctrl-C, kill, a closed terminal or output pipe: stop the compilers and remove temp files.
  sabre::support::install_termination_handlers();
  if (argc < 2) {
    print_help();
    return flushed(kExitUsage);
  }
  if (!std::strcmp(argv[1], "help")) {
    print_help();
    return flushed(kExitOk);
  }
  // The top level is CLI11's: --help, --version and the subcommand; each subcommand parses the rest.
  CLI::App app{"sabre"};
  app.set_help_flag("-h,--help");
  app.set_version_flag("-V,--version", version_text());
  app.require_subcommand(0, 1);
  std::map<std::string, CLI::App*> subs;
  // Each subcommand answers its own --help (CLI11 would hand it to the top level otherwise).
  for (const auto& c : commands()) {
    subs[c.name] = app.add_subcommand(c.name, c.summary)->prefix_command();
    subs[c.name]->set_help_flag();
  }
  if (argv[1][0] != '-' && !subs.count(argv[1])) {
    std::fprintf(stderr, "sabre: error: %s (see sabre --help)\n", unknown_command(argv[1]).c_str());
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    print_help();
    return flushed(kExitOk);
  } catch (const CLI::CallForVersion&) {
    std::printf("%s\n", version_text().c_str());
    return flushed(kExitOk);
  } catch (const CLI::ExtrasError&) {
    std::fprintf(stderr, "sabre: error: unknown option '%s'; give a command first (see sabre --help)\n", argv[1]);
    return kExitUsage;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "sabre: error: %s (see sabre --help)\n", e.what());
    return kExitUsage;
  }
  for (const auto& c : commands()) {
    if (!subs[c.name]->parsed()) continue;
    std::vector<std::string> rest = subs[c.name]->remaining();
    try {
      int rc = c.run(rest);
      sabre::support::check_stream(stdout, "standard output");
      return rc;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sabre %s: error: %s\n", c.name, describe(e).c_str());
      return kExitError;
    }
  }
  print_help();
  return flushed(kExitUsage);
}

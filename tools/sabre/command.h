// The sabre CLI's subcommands register themselves here; main.cpp only dispatches.
#pragma once

#include <string>
#include <vector>

namespace sabre::cli {

struct Command {
  const char* name;     // "inspect"
  const char* summary;  // one line for `sabre --help`
  int (*run)(const std::vector<std::string>& args);  // args after the subcommand name; returns exit code
};

// Registers at static-initialization time: `static const bool reg = register_command({...});`
bool register_command(Command c);

// Exit codes shared by all subcommands.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;  // bad input, a failed run: the message says what
inline constexpr int kExitUsage = 2;  // bad command line
inline constexpr int kExitMismatch = 3;  // run --compare-reference: an output beyond tolerance
inline constexpr int kExitSkipped = 77;

}  // namespace sabre::cli

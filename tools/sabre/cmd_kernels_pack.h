// sabre kernels pack (cmd_kernels_pack.cpp), an action of sabre kernels (cmd_kernels.cpp).
#pragma once

#include "cli_util.h"
#include "command.h"

namespace sabre::cli {

// Builds the kernels of a pack list (--list FILE, else the built-in one) for --arch into the compile
// cache (--cache-dir), -j at a time; --dry-run says what it would build. Returns the exit code.
int kernels_pack(const ParsedArgs& args);

}  // namespace sabre::cli

// sabre kernels pack (cmd_kernels_pack.cpp), an action of sabre kernels (cmd_kernels.cpp).
#pragma once

#include "cli_util.h"
#include "command.h"
#include "tune/compile_cache.h"

namespace sabre::cli {

// Builds the kernels of a pack list (--list FILE, else the built-in one) for --arch into the compile
// cache (--cache-dir), -j at a time; --dry-run says what it would build. Returns the exit code.
int kernels_pack(const ParsedArgs& args);

// --batch N of kernels pack and build: the cache's kernels a translation unit; a UsageError outside 1..16.
void apply_batch_flag(const ParsedArgs& args, tune::CompileCache& cache);

}  // namespace sabre::cli

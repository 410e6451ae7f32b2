// The kernel pack: the CUTLASS kernels that sabre compile picks most across the model zoo, built
// once per machine and toolchain into the compile cache (sabre kernels pack), so that a model
// nobody tuned compiles from cache hits. The list is data (data/kernel_pack.txt, made by
// `bench/zoo.py pack-list`, built into sabre); the names are the kernels' identity, and each is
// built with exactly the job sabre compile builds it with, so the keys meet.
// Tests: tests/unit/kernel_pack_test.cpp, tests/cli/kernel_pack.py
#pragma once

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "tune/compile_cache.h"

namespace sabre::tune {

// A bad pack list: the message names the list and the line ("LIST:12: 'x' is not a kernel name ...").
struct PackListError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct PackEntry {
  std::string name;
  int line = 0;  // 1-based line in the list
};

// One kernel name a line; '#' starts a comment, blank lines are skipped. `origin` names the list in
// errors. Throws PackListError for a line whose first word is no kernel name of any family (GEMM,
// conv, cuBLASLt), for a line with more than one name, and for a name listed twice.
std::vector<PackEntry> parse_pack_list(const std::string& text, const std::string& origin);
// The list built into sabre (data/kernel_pack.txt at build time) and its name in messages.
const std::string& builtin_pack_list();
const char* builtin_pack_list_origin();

// The compile-cache job sabre compile builds kernel `name` with for target_sm (the GEMM, conv or
// cuBLASLt job). Throws std::invalid_argument saying why where the kernel cannot run on target_sm
// or the name is no kernel's.
CompileJob kernel_compile_job(const std::string& name, int target_sm);

// The pack's record in a cache directory (pack-<arch>.json): which cache entries (NAME-KEY) it holds,
// written before it builds so an interrupted pack still names its kernels; sabre compile reads it to
// say which of its cache hits came from the pack.
void write_pack_record(const std::string& cache_dir, const std::string& arch, const std::string& list_origin,
                       const std::vector<std::pair<std::string, std::string>>& name_keys);
// Every NAME-KEY the pack records in cache_dir hold (empty where there are none or they are unreadable).
std::set<std::string> pack_entries(const std::string& cache_dir);

}  // namespace sabre::tune

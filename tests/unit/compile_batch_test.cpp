// Batch builds of the compile cache (tune/compile_batch.h): which kernels share a translation unit,
// the unit's text, each kernel's exports, and the cache's batch path with a stand-in compiler.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "tune/compile_batch.h"
#include "tune/compile_cache.h"

namespace fs = std::filesystem;
using namespace sabre::tune;

namespace {

// A kernel source shaped as the emitters write them: a commented preamble of includes, then code.
std::string kernel_source(const std::string& name, const std::string& define = "") {
  return "// Generated for " + name + "\n" + define + "#include <cstdint>\n#include \"sabre/kernel_abi.h\"\n\n" +
         "namespace {\nint helper() { return 1; }\n}  // namespace\n\nextern \"C\" {\n" + "int " + name +
         "_run(void) { return helper(); }\nconst char* " + name + "_signature(void) { return \"x\"; }\n" +
         "const sabre_kernel_entry* sabre_kernel_registry(int* count, int* abi_version) { return 0; }\n}  // extern \"C\"\n";
}

CompileJob job(const std::string& name, const std::string& family = "cutlass_gemm_sm90",
               std::vector<std::string> flags = {"-O3", "-gencode", "arch=compute_90a,code=sm_90a"},
               const std::string& define = "") {
  return {name, kernel_source(name, define), std::move(flags), family};
}

std::vector<size_t> all(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST(CompileBatch, SplitsPreambleFromBodyAndRefusesWhatCannotShareAUnit) {
  auto s = split_for_batch(job("k_a", "fam", {}, "#define CUTLASS_ENABLE_GDC_FOR_SM90 1\n#define LONG \\\n  2\n"));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->preamble,
            "#define CUTLASS_ENABLE_GDC_FOR_SM90 1\n#define LONG \\\n  2\n#include <cstdint>\n#include \"sabre/kernel_abi.h\"\n")
      << "comments and blank lines leave the preamble; a continued directive stays whole";
  EXPECT_EQ(s->body.rfind("namespace {\n", 0), 0u);
  EXPECT_FALSE(split_for_batch(job("k_a", ""))) << "no family: always alone";
  EXPECT_FALSE(split_for_batch(job("k-a"))) << "a name that is no C identifier cannot prefix symbols";
  CompileJob defines = job("k_a");
  defines.source += "#define OWN_MACRO(x) \\\n  (x)\n";
  auto d = split_for_batch(defines);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->macros, std::vector<std::string>{"OWN_MACRO"}) << "undefined after the body, so it leaks into no other";
  CompileJob undefines = job("k_a");
  undefines.source += "#undef SOMETHING\n";
  EXPECT_FALSE(split_for_batch(undefines)) << "an #undef would change the next body's state";
  CompileJob includes = job("k_a");
  includes.source += "  #  include <vector>\n";
  EXPECT_FALSE(split_for_batch(includes));
  CompileJob guarded = job("k_a");
  guarded.source += "#if defined(__CUDA_ARCH__)\n#endif\n";
  EXPECT_TRUE(split_for_batch(guarded)) << "conditionals in the body change no state";
}

TEST(CompileBatch, GroupsByFamilyFlagsAndPreambleWithinTheBatchSize) {
  std::vector<CompileJob> jobs;
  for (int i = 0; i < 6; ++i) jobs.push_back(job("gemm_" + std::to_string(i)));                 // 0-5
  jobs.push_back(job("pdl", "cutlass_gemm_sm90", {"-O3", "-gencode", "arch=compute_90a,code=sm_90a"},
                     "#define CUTLASS_ENABLE_GDC_FOR_SM90 1\n"));                                  // 6: other preamble
  jobs.push_back(job("other_flags", "cutlass_gemm_sm90", {"-O2"}));                                 // 7
  jobs.push_back(job("conv_0", "cutlass_conv_sm90"));                                               // 8
  jobs.push_back(job("conv_1", "cutlass_conv_sm90"));                                               // 9
  jobs.push_back(job("lone", ""));                                                                  // 10
  const auto units = plan_compile_units(jobs, all(jobs.size()), 4, 1);
  std::vector<std::vector<size_t>> want = {{0, 1, 2}, {3, 4, 5}, {6}, {7}, {8, 9}, {10}};
  EXPECT_EQ(units, want) << "six kernels of a family: two balanced batches of three, not four and two";
  for (int max : {1, 2, 3}) {
    const auto u = plan_compile_units(jobs, all(jobs.size()), max, 1);
    std::set<size_t> seen;
    for (const auto& unit : u) {
      EXPECT_LE(unit.size(), size_t(max));
      for (size_t i : unit) {
        EXPECT_TRUE(seen.insert(i).second) << "job " << i << " in two units";
        EXPECT_EQ(jobs[i].batch_family, jobs[unit.front()].batch_family);
        EXPECT_EQ(jobs[i].flags, jobs[unit.front()].flags);
      }
    }
    EXPECT_EQ(seen.size(), jobs.size());
  }
  EXPECT_EQ(plan_compile_units(jobs, all(jobs.size()), 1, 1).size(), jobs.size()) << "batch size 1: each alone";
  // Only what todo names, in its order.
  EXPECT_EQ(plan_compile_units(jobs, {5, 2, 10}, 4, 1), (std::vector<std::vector<size_t>>{{5, 2}, {10}}));
}

TEST(CompileBatch, BatchesOnlyWhereThatFinishesSoonerWithTheCompilersGiven) {
  std::vector<CompileJob> jobs;
  for (int i = 0; i < 16; ++i) jobs.push_back(job("k" + std::to_string(i)));
  auto sizes = [&](size_t n, int parallel) {
    std::vector<size_t> s;
    for (const auto& u : plan_compile_units(jobs, all(n), 4, parallel)) s.push_back(u.size());
    return s;
  };
  EXPECT_EQ(sizes(4, 16), (std::vector<size_t>{1, 1, 1, 1})) << "idle compilers: each kernel alone is soonest";
  EXPECT_EQ(sizes(4, 2), (std::vector<size_t>{2, 2}));
  EXPECT_EQ(sizes(4, 1), (std::vector<size_t>{4}));
  EXPECT_EQ(sizes(16, 4), (std::vector<size_t>{4, 4, 4, 4}));
  // A repeated name cannot share a unit with itself.
  jobs[1] = jobs[0];
  EXPECT_EQ(plan_compile_units(jobs, all(3), 4, 1), (std::vector<std::vector<size_t>>{{0, 2}, {1}}));
}

TEST(CompileBatch, SourceWrapsEachBodyAndRenamesItsRegistry) {
  CompileJob a = job("k_a"), b = job("k_b");
  a.source += "#define OWN_MACRO 1\n";
  const std::string tu = batch_source({&a, &b});
  EXPECT_EQ(std::count(tu.begin(), tu.end(), '#') - 2 * 4 /*two #define, two #undef a kernel*/ - 2 /*OWN_MACRO*/, 2)
      << "the shared preamble's two includes once:\n" << tu;
  EXPECT_NE(tu.find("#define OWN_MACRO 1\n}  // namespace sabre_batch_0\n#undef sabre_kernel_registry\n#undef "
                    "sabre_conv_registry\n#undef OWN_MACRO\n"),
            std::string::npos)
      << tu;
  EXPECT_NE(tu.find("#define sabre_kernel_registry k_a_batch_sabre_kernel_registry\n#define sabre_conv_registry "
                    "k_a_batch_sabre_conv_registry\nnamespace sabre_batch_0 {\nnamespace {\nint helper()"),
            std::string::npos)
      << tu;
  EXPECT_NE(tu.find("#define sabre_conv_registry k_b_batch_sabre_conv_registry\nnamespace sabre_batch_1 {\n"),
            std::string::npos);
  EXPECT_EQ(tu.find("Generated for"), std::string::npos) << "comments of the preamble are dropped";
  const CompileJob other = job("pdl", "cutlass_gemm_sm90", {}, "#define CUTLASS_ENABLE_GDC_FOR_SM90 1\n");
  EXPECT_THROW(batch_source({&a, &other}), std::logic_error);
}

TEST(CompileBatch, ExportsOnlyTheKernelsOwnSymbolsAndItsRegistry) {
  // "k" is a prefix of "k_bias"'s name: k's library must not export k_bias's functions.
  CompileJob k = job("k");
  k.source += "int k_extra_helper_value;\n";
  const BatchExports e = batch_exports(k);
  EXPECT_EQ(e.symbols, (std::vector<std::string>{"k_run", "k_signature", "k_extra_helper_value"}));
  EXPECT_EQ(e.aliases, (std::vector<std::pair<std::string, std::string>>{{"sabre_kernel_registry", "k_batch_sabre_kernel_registry"}}));
  const std::string script = version_script(e);
  EXPECT_NE(script.find("    k_run;\n"), std::string::npos);
  EXPECT_NE(script.find("    sabre_kernel_registry;\n"), std::string::npos);
  EXPECT_NE(script.find("local: *;"), std::string::npos);
  const BatchExports eb = batch_exports(job("k_bias"));
  EXPECT_EQ(eb.symbols, (std::vector<std::string>{"k_bias_run", "k_bias_signature"}));
}

namespace {
// A stand-in for nvcc: "compiles" (-c or -shared with a .cu) by copying the source and "links" (a .o)
// by writing the object and the version script, so a test can see what each library would export.
// Fails on a source that holds #error. Logs each run as "compile N" (N kernels) or "link".
struct BatchCompiler {
  fs::path dir;
  std::string path;
  BatchCompiler() {
    dir = fs::temp_directory_path() / ("sabre_batch_test_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "cache");
    path = (dir / "fakecc").string();
    std::ofstream(path) << "#!/bin/sh\n"
                           "if [ \"$1\" = --version ]; then echo 'fake cuda compiler'; exit 0; fi\n"
                           "out=; src=; obj=; map=\n"
                           "while [ $# -gt 0 ]; do case \"$1\" in -o) out=$2; shift;; *.cu) src=$1;; *.o) obj=$1;;\n"
                           "  --version-script=*) map=${1#--version-script=};; esac; shift; done\n"
                           "if [ -n \"$src\" ]; then\n"
                           "  echo \"compile $(grep -c '^namespace sabre_batch_' \"$src\")\" >> " << (dir / "runs").string() << "\n"
                           "  if grep -q '#error' \"$src\"; then echo \"$src: error: boom\" >&2; exit 1; fi\n"
                           "  cp \"$src\" \"$out\"\n"
                           "else\n"
                           "  echo link >> " << (dir / "runs").string() << "\n"
                           "  cat \"$obj\" \"$map\" > \"$out\"\n"
                           "fi\n";
    chmod(path.c_str(), 0755);
  }
  ~BatchCompiler() { fs::remove_all(dir); }
  std::vector<std::string> runs() const {
    std::ifstream in(dir / "runs");
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    fs::remove(dir / "runs");
    return out;
  }
};
}  // namespace

TEST(CompileBatch, CacheBuildsABatchOnceAndKeepsOneEntryPerKernel) {
  BatchCompiler cc;
  CompileCache cache((cc.dir / "cache").string(), cc.path);
  ASSERT_EQ(cache.max_batch(), 4);
  std::vector<CompileJob> jobs = {job("k_a"), job("k_b"), job("k_c")};
  auto r = cache.compile_all(jobs, 1, true);
  EXPECT_EQ(cc.runs(), (std::vector<std::string>{"compile 3", "link", "link", "link"}));
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_TRUE(r[i].ok) << r[i].log;
    EXPECT_EQ(r[i].name, jobs[i].name);
    EXPECT_EQ(r[i].batch, "k_a,k_b,k_c");
    EXPECT_EQ(fs::path(r[i].library).filename(), jobs[i].name + "-" + cache.key(jobs[i]) + ".so")
        << "keyed by the kernel's own job, as when built alone";
    const std::string lib = read(r[i].library);
    EXPECT_NE(lib.find("    " + jobs[i].name + "_run;\n"), std::string::npos) << lib;
    for (size_t o = 0; o < jobs.size(); ++o)
      if (o != i) {
        EXPECT_EQ(lib.find("    " + jobs[o].name + "_run;\n"), std::string::npos) << "exports another kernel's";
      }
    EXPECT_NE(read(r[i].log).find("built in one translation unit with: k_a,k_b,k_c"), std::string::npos);
  }
  // A kernel alone keys and finds the same entry: the batch left nothing another run must redo.
  auto again = cache.compile_all({jobs[1]}, 1, true);
  EXPECT_TRUE(again[0].ok && again[0].cached);
  EXPECT_TRUE(cc.runs().empty());
  for (const auto& e : fs::directory_iterator(cc.dir / "cache"))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << "left behind: " << e.path();
}

TEST(CompileBatch, AFailedBatchIsBuiltOneByOneSoTheFailureNamesItsKernel) {
  BatchCompiler cc;
  CompileCache cache((cc.dir / "cache").string(), cc.path);
  std::vector<CompileJob> jobs = {job("k_a"), job("k_bad"), job("k_c")};
  jobs[1].source += "#error broken\n";
  auto r = cache.compile_all(jobs, 1, true);
  EXPECT_EQ(cc.runs(), (std::vector<std::string>{"compile 3", "compile 0", "compile 0", "compile 0"}));
  EXPECT_TRUE(r[0].ok && r[2].ok);
  EXPECT_TRUE(r[0].batch.empty()) << "built alone after the batch failed";
  ASSERT_FALSE(r[1].ok);
  EXPECT_EQ(r[1].name, "k_bad");
  EXPECT_EQ(fs::path(r[1].log).filename(), "k_bad-" + cache.key(jobs[1]) + ".log");
  EXPECT_NE(read(r[1].log).find("error: boom"), std::string::npos);
  EXPECT_TRUE(cache.lookup(jobs[1]).cached) << "the failure is cached against its kernel alone";
  EXPECT_TRUE(cache.lookup(jobs[0]).ok);
}

TEST(CompileBatch, BatchSizeIsConfigurableAndChecked) {
  BatchCompiler cc;
  CompileCache cache((cc.dir / "cache").string(), cc.path);
  cache.set_max_batch(1);
  std::vector<CompileJob> jobs = {job("k_a"), job("k_b")};
  cache.compile_all(jobs, 1, true);
  EXPECT_EQ(cc.runs(), (std::vector<std::string>{"compile 0", "compile 0"}));
  EXPECT_THROW(cache.set_max_batch(0), std::invalid_argument);
  EXPECT_THROW(cache.set_max_batch(CompileCache::kMaxBatch + 1), std::invalid_argument);
  setenv("SABRE_KERNEL_BATCH", "2", 1);
  EXPECT_EQ(CompileCache((cc.dir / "cache").string(), cc.path).max_batch(), 2);
  setenv("SABRE_KERNEL_BATCH", "four", 1);
  try {
    CompileCache bad((cc.dir / "cache").string(), cc.path);
    ADD_FAILURE() << "a bad SABRE_KERNEL_BATCH was taken";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("SABRE_KERNEL_BATCH='four' is not a batch size"), std::string::npos) << e.what();
  }
  unsetenv("SABRE_KERNEL_BATCH");
}

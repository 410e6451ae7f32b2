#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tune/compile_cache.h"

namespace fs = std::filesystem;
using namespace sabre::tune;

namespace {
// A stand-in for nvcc: prints a version, "compiles" by copying the source to the output, counts
// its runs, and fails on sources that contain #error (so failures and caching can be observed).
struct FakeCompiler {
  fs::path dir;
  std::string path;
  explicit FakeCompiler(const std::string& version) {
    dir = fs::temp_directory_path() / ("sabre_cc_test_" + std::to_string(getpid()) + "_" + version);
    fs::remove_all(dir);
    fs::create_directories(dir / "cache");
    path = (dir / "fakecc").string();
    std::ofstream(path) << "#!/bin/sh\n"
                           "if [ \"$1\" = --version ]; then echo 'fake cuda compiler " << version << "'; exit 0; fi\n"
                           "echo run >> " << (dir / "runs").string() << "\n"
                           "out=; src=; while [ $# -gt 0 ]; do case \"$1\" in -o) out=$2; shift;; *.cu) src=$1;; esac; shift; done\n"
                           "if grep -q '#error' \"$src\"; then echo \"$src: error: boom\" >&2; exit 1; fi\n"
                           "cp \"$src\" \"$out\"\n";
    chmod(path.c_str(), 0755);
  }
  ~FakeCompiler() { fs::remove_all(dir); }
  int runs() const {
    std::ifstream in(dir / "runs");
    int n = 0;
    std::string line;
    while (std::getline(in, line)) ++n;
    return n;
  }
};
}  // namespace

TEST(CompileCache, KeyDependsOnSourceFlagsAndCompilerVersion) {
  FakeCompiler a("1.0"), b("2.0");
  CompileCache ca((a.dir / "cache").string(), a.path), cb((b.dir / "cache").string(), b.path);
  CompileJob j{"k", "int x;", {"-O3"}};
  CompileJob other_src = j, other_flags = j;
  other_src.source = "int y;";
  other_flags.flags = {"-O2"};
  // Stable: an equal job, keyed by another cache object on the same compiler, gets the same key.
  CompileCache ca_again((a.dir / "cache").string(), a.path);
  const CompileJob same{std::string(j.name), std::string(j.source), std::vector<std::string>(j.flags)};
  EXPECT_EQ(ca.key(j), ca_again.key(same));
  EXPECT_EQ(ca.key(j).size(), 16u);
  EXPECT_NE(ca.key(j), ca.key(other_src));
  EXPECT_NE(ca.key(j), ca.key(other_flags));
  EXPECT_NE(ca.key(j), cb.key(j)) << "a new compiler must not reuse old objects";
  CompileJob renamed = j;
  renamed.name = "other_name";
  EXPECT_EQ(ca.key(j), ca.key(renamed)) << "the key is the content; the name is the file stem";
}

TEST(CompileCache, KeyHoldsIncludeDirectoriesByContentNotPath) {
  // The same headers under two paths (two machines, two checkouts) give one key; an edited header
  // gives another. Both spellings: -I<dir> and -I <dir>.
  FakeCompiler a("1.0");
  CompileCache cache((a.dir / "cache").string(), a.path);
  auto headers = [&](const std::string& where, const std::string& text) {
    const fs::path d = a.dir / where;
    fs::create_directories(d / "sabre");
    std::ofstream(d / "sabre" / "kernel_abi.h") << text;
    std::ofstream(d / "top.h") << "#pragma once\n";
    return d.string();
  };
  const std::string one = headers("machine_one/include", "int abi_v1;\n");
  const std::string two = headers("elsewhere/checkout/include", "int abi_v1;\n");
  const std::string edited = headers("edited/include", "int abi_v2;\n");
  const CompileJob j1{"k", "int x;", {"-O3", "-I" + one}}, j2{"k", "int x;", {"-O3", "-I" + two}},
      j3{"k", "int x;", {"-O3", "-I" + edited}}, j4{"k", "int x;", {"-O3", "-I", two}};
  EXPECT_EQ(cache.key(j1), cache.key(j2)) << "the key must not hold the include path";
  EXPECT_NE(cache.key(j1), cache.key(j3)) << "an edited header must change the key";
  EXPECT_EQ(cache.key(j1), cache.key(j4)) << "-I DIR is -IDIR";
}

TEST(CompileCache, CompilesOnceAndCachesSuccessesAndFailures) {
  FakeCompiler cc("1.0");
  CompileCache cache((cc.dir / "cache").string(), cc.path);
  std::vector<CompileJob> jobs = {{"good_a", "// a", {}}, {"good_b", "// b", {}}, {"bad", "#error nope", {}}};
  auto r1 = cache.compile_all(jobs, 2, true);
  ASSERT_EQ(r1.size(), 3u);
  EXPECT_TRUE(r1[0].ok && !r1[0].cached);
  EXPECT_TRUE(r1[1].ok);
  EXPECT_FALSE(r1[2].ok);
  EXPECT_TRUE(fs::exists(r1[0].library));
  ASSERT_TRUE(fs::exists(r1[2].log)) << "a failed compile keeps its log";
  std::ifstream log(r1[2].log);
  std::string text((std::istreambuf_iterator<char>(log)), {});
  EXPECT_NE(text.find("error: boom"), std::string::npos) << text;
  EXPECT_EQ(cc.runs(), 3);

  auto r2 = cache.compile_all(jobs, 2, true);
  EXPECT_EQ(cc.runs(), 3) << "warm cache: no compiler runs, failures included";
  EXPECT_TRUE(r2[0].cached && r2[0].ok);
  EXPECT_EQ(r2[0].library, r1[0].library);
  EXPECT_TRUE(r2[2].cached && !r2[2].ok);
  // No temporaries are left behind.
  for (const auto& e : fs::directory_iterator(cc.dir / "cache"))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(CompileCache, MissingCompilerIsAClearError) {
  try {
    CompileCache cache(fs::temp_directory_path() / "sabre_cc_missing", "/nonexistent/nvcc");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/nvcc"), std::string::npos) << e.what();
  }
}

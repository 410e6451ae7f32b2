// Host-side checks of GEMM kernels the compile cache built in one translation unit (tune/compile_batch.h),
// no GPU needed: each kernel's cache entry is its own library, whose registry lists exactly that kernel,
// whose entry points and NAME_signature resolve by dlsym, which refuses bad arguments with a message, and
// which exports none of its batch mates' symbols.
//   batch_abi_check CACHE_DIR NAME...   (libraries CACHE_DIR/NAME-KEY.so, logs CACHE_DIR/NAME-KEY.log)
#include <dlfcn.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "sabre/kernel_abi.h"

namespace fs = std::filesystem;

namespace {

int failures = 0;

void fail(const std::string& name, const std::string& what) {
  ++failures;
  std::printf("FAIL %s: %s\n", name.c_str(), what.c_str());
}

// The one NAME-KEY.so in dir, or "".
std::string library_of(const std::string& dir, const std::string& name) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (f.rfind(name + "-", 0) == 0 && f.size() == name.size() + 1 + 16 + 3 && f.ends_with(".so")) found.push_back(e.path());
  }
  return found.size() == 1 ? found.front() : "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: batch_abi_check CACHE_DIR NAME NAME...\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::vector<std::string> names(argv + 2, argv + argc);
  for (const std::string& name : names) {
    const std::string lib = library_of(dir, name);
    if (lib.empty()) {
      fail(name, "no single " + name + "-KEY.so in " + dir);
      continue;
    }
    std::ifstream log(lib.substr(0, lib.size() - 3) + ".log");
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    if (text.find("built in one translation unit with: ") == std::string::npos)
      fail(name, "its log does not say it was built in a batch:\n" + text.substr(0, 2000));
    void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      fail(name, std::string("dlopen: ") + dlerror());
      continue;
    }
    auto reg = reinterpret_cast<sabre_kernel_registry_fn>(dlsym(h, SABRE_KERNEL_REGISTRY_SYMBOL));
    int count = 0, abi = 0;
    const sabre_kernel_entry* e = reg ? reg(&count, &abi) : nullptr;
    if (!e || count != 1 || abi != SABRE_KERNEL_ABI_VERSION || name != e->name) {
      fail(name, "the registry does not list exactly this kernel with this ABI version");
      continue;
    }
    for (const char* fn : {"_can_implement", "_workspace_size", "_run", "_last_error", "_signature"})
      if (!dlsym(h, (name + fn).c_str())) fail(name, "exports no " + name + fn);
    if (e->can_implement != dlsym(h, (name + "_can_implement").c_str()) || e->run != dlsym(h, (name + "_run").c_str()))
      fail(name, "the registry's entry points are not the exported ones");
    auto sig = reinterpret_cast<const char* (*)(void)>(dlsym(h, (name + "_signature").c_str()));
    const std::string s = sig ? sig() : "";
    if (s.rfind("sabre-kernel-signature/1 op=gemm ", 0) != 0) fail(name, "signature '" + s + "' is not a GEMM kernel's");
    if (e->can_implement(nullptr) != SABRE_NOT_SUPPORTED || !*e->last_error()) fail(name, "NULL args accepted");
    for (const std::string& other : names)
      if (other != name && dlsym(h, (other + "_run").c_str())) fail(name, "exports its batch mate's " + other + "_run");
    dlclose(h);
    std::printf("ok %s: %s\n", name.c_str(), s.c_str());
  }
  return failures ? 1 : 0;
}

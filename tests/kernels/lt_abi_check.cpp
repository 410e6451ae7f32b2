// Host-side checks of built cuBLASLt kernel libraries (lt_spec.h, emit_lt_kernel), no GPU needed:
// the registry lists exactly the kernel, and can_implement, workspace_size and run refuse what the
// descriptors cannot say (NULL args, a missing operand, bias or residual, leading dimensions below
// the extents) with a message, before any cuBLASLt or CUDA call.
//   lt_abi_check DIR NAME...   (libraries DIR/NAME.so, as sabre kernels build writes them)
#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "sabre/kernel_abi.h"

namespace {

int failures = 0;

void expect(bool ok, const std::string& name, const char* what, const char* last_error) {
  if (ok) return;
  ++failures;
  std::printf("FAIL %s: %s (last_error: %s)\n", name.c_str(), what, last_error);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: lt_abi_check DIR NAME...\n");
    return 2;
  }
  for (int i = 2; i < argc; ++i) {
    const std::string name = argv[i], lib = std::string(argv[1]) + "/" + name + ".so";
    void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      std::printf("FAIL %s: dlopen: %s\n", name.c_str(), dlerror());
      ++failures;
      continue;
    }
    auto reg = reinterpret_cast<sabre_kernel_registry_fn>(dlsym(h, SABRE_KERNEL_REGISTRY_SYMBOL));
    int count = 0, abi = 0;
    const sabre_kernel_entry* e = reg ? reg(&count, &abi) : nullptr;
    if (!e || count != 1 || abi != SABRE_KERNEL_ABI_VERSION || name != e->name) {
      std::printf("FAIL %s: the registry does not list exactly this kernel with this ABI version\n", name.c_str());
      ++failures;
      continue;
    }
    const bool bias = name.find("_bias") != std::string::npos, res = name.find("_res") != std::string::npos;
    static char buf[64];
    sabre_gemm_args ok{};
    ok.m = 128, ok.n = 768, ok.k = 768, ok.batch = 1;
    ok.a = buf, ok.b = buf, ok.d = buf, ok.bias = buf, ok.residual = buf;
    ok.lda = 768, ok.ldb = 768, ok.ldd = 768, ok.ldr = 768;
    ok.alpha = 1, ok.beta = 1;
    auto refused = [&](const sabre_gemm_args* a, const char* what) {
      const int ci = e->can_implement(a);
      expect(ci == SABRE_NOT_SUPPORTED && *e->last_error(), name, what, e->last_error());
      expect(e->workspace_size(a) == 0, name, "workspace_size of refused args is not 0", e->last_error());
      const int rs = e->run(a, nullptr);
      expect(rs == SABRE_NOT_SUPPORTED, name, "run did not refuse what can_implement refused", e->last_error());
    };
    refused(nullptr, "NULL args accepted");
    sabre_gemm_args a = ok;
    a.a = nullptr;
    refused(&a, "a NULL A accepted");
    a = ok, a.k = 0;
    refused(&a, "k = 0 accepted");
    a = ok, a.lda = 767;
    refused(&a, "lda < k accepted");
    a = ok, a.ldd = 767;
    refused(&a, "ldd < n accepted");
    a = ok, a.ldb = 767;  // below k (tn: B is [n, k]) and below n (tt: B is [k, n])
    refused(&a, "ldb below B's contiguous extent accepted");
    if (bias) {
      a = ok, a.bias = nullptr;
      refused(&a, "a bias kernel took a NULL bias");
    }
    if (res) {
      a = ok, a.residual = nullptr;
      refused(&a, "a residual kernel took a NULL residual");
      a = ok, a.ldr = 767;
      refused(&a, "ldr < n accepted");
    }
    a = ok, a.m = 0;  // empty: nothing to do, no device touched
    expect(e->can_implement(&a) == SABRE_OK && e->run(&a, nullptr) == SABRE_OK, name, "an empty problem was refused",
           e->last_error());
    std::printf("%s %s\n", failures ? "checked" : "ok", name.c_str());
  }
  std::printf("%d failure(s)\n", failures);
  return failures ? 1 : 0;
}

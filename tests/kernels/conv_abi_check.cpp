// Host-side checks of built conv kernel libraries, no GPU needed: the registry, and what
// can_implement accepts and refuses (groups, channel alignment, pointers, NULLs) with a message.
// few_channels kernels are checked on C = 8 (the padded stem's) and must refuse C past 16; parallel
// split-K kernels on their workspace size and the refusal of a missing, short or misaligned one.
// can_implement and workspace_size never touch the device (pointers are only checked, not read).
//   conv_abi_check DIR NAME...   (libraries DIR/NAME.so, as sabre kernels build writes them)
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "sabre/kernel_abi.h"

namespace {

int failures = 0;

void expect(bool ok, const std::string& name, const char* what, const sabre_conv_entry& e) {
  if (ok) return;
  ++failures;
  std::printf("FAIL %s: %s (last_error: %s)\n", name.c_str(), what, e.last_error());
}

// The alignment from the name's "_a<N>_" token.
int alignment_of(const std::string& name) {
  size_t p = name.find("_a", name.find("_s"));
  return p == std::string::npos ? 0 : std::atoi(name.c_str() + p + 2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: conv_abi_check DIR NAME...\n");
    return 2;
  }
  for (int i = 2; i < argc; ++i) {
    std::string name = argv[i], lib = std::string(argv[1]) + "/" + name + ".so";
    void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    auto reg = h ? reinterpret_cast<sabre_conv_registry_fn>(dlsym(h, SABRE_CONV_REGISTRY_SYMBOL)) : nullptr;
    int count = 0, abi = 0;
    const sabre_conv_entry* es = reg ? reg(&count, &abi) : nullptr;
    if (!es || count != 1 || abi != SABRE_KERNEL_ABI_VERSION || name != es[0].name) {
      std::printf("FAIL %s: no matching %s in %s (%s)\n", name.c_str(), SABRE_CONV_REGISTRY_SYMBOL, lib.c_str(),
                  h ? "registry mismatch" : dlerror());
      ++failures;
      continue;
    }
    const sabre_conv_entry& e = es[0];
    const int align = alignment_of(name);
    const bool few = name.find("_few_channels_") != std::string::npos;
    // Fake device addresses, 256-byte aligned: only their alignment is looked at.
    sabre_conv_args a{};
    a.n = 2, a.h = 14, a.w = 14, a.c = few ? 8 : 64, a.k = 64, a.r = 3, a.s = 3, a.p = 14, a.q = 14;
    a.pad_h = a.pad_w = 1, a.stride_h = a.stride_w = 1, a.dil_h = a.dil_w = 1, a.groups = 1;
    a.x = reinterpret_cast<void*>(0x10000), a.filter = reinterpret_cast<void*>(0x20000);
    a.bias = reinterpret_cast<void*>(0x30000), a.residual = reinterpret_cast<void*>(0x40000);
    a.y = reinterpret_cast<void*>(0x50000), a.alpha = 1, a.beta = 1;
    expect(e.can_implement(&a) == SABRE_OK, name, few ? "3x3 C=8 K=64 should be implementable" : "3x3 C=K=64 should be implementable", e);
    // Parallel split-K ("splitkp<S>"): S slices of f32 partial sums [n,p,q,k] in the workspace, and
    // run refuses a missing, short or misaligned one before it launches anything.
    const size_t sp = name.find("_splitkp");
    const int slices = sp == std::string::npos ? 0 : std::atoi(name.c_str() + sp + 8);
    if (slices) {
      const size_t need = size_t(slices) * size_t(a.n * a.p * a.q * a.k) * 4;
      expect(e.workspace_size(&a) == need, name, "parallel split-K: workspace = slices*n*p*q*k f32", e);
      expect(e.run(&a, nullptr) == SABRE_BAD_ARGS && std::strstr(e.last_error(), "workspace"), name,
             "run without the workspace must be refused with a message", e);
      sabre_conv_args w = a;
      w.workspace = reinterpret_cast<void*>(0x60000), w.workspace_size = need - 4;
      expect(e.run(&w, nullptr) == SABRE_BAD_ARGS, name, "run with a short workspace must be refused", e);
      w.workspace = reinterpret_cast<void*>(0x60004), w.workspace_size = need;
      expect(e.run(&w, nullptr) == SABRE_BAD_ARGS && std::strstr(e.last_error(), "16-byte"), name,
             "run with a misaligned workspace must be refused with a message", e);
    } else if (name.find("_splitk") == std::string::npos) {
      expect(e.workspace_size(&a) == 0, name, "no split-K: workspace 0", e);
    }
    sabre_conv_args b = a;
    b.stride_h = b.stride_w = 2, b.dil_h = b.dil_w = 2, b.pad_h = b.pad_w = 2, b.p = b.q = 6;
    expect(e.can_implement(&b) == SABRE_OK, name, "stride 2, dilation 2 should be implementable", e);
    b = a;
    b.groups = 2;
    expect(e.can_implement(&b) == SABRE_NOT_SUPPORTED && std::strstr(e.last_error(), "groups"), name,
           "groups=2 must be refused with a message", e);
    expect(e.run(&b, nullptr) == SABRE_NOT_SUPPORTED, name, "run must refuse groups=2 too", e);
    b = a;
    b.c = 3;  // an RGB stem: only alignment-1 kernels take it
    int st = e.can_implement(&b);
    expect(align == 1 ? st == SABRE_OK : st == SABRE_NOT_SUPPORTED && std::strstr(e.last_error(), "alignment"), name,
           "C=3 must be taken by alignment-1 kernels only", e);
    if (few) {
      for (int64_t c : {24, 64}) {
        b = a;
        b.c = c;
        expect(e.can_implement(&b) == SABRE_NOT_SUPPORTED && std::strstr(e.last_error(), "c <= 16"), name,
               "few_channels must refuse C past 16 with a message", e);
      }
      b = a;
      b.c = 16;
      expect(e.can_implement(&b) == SABRE_OK, name, "few_channels takes C=16", e);
      b = a;
      b.r = b.s = 7, b.stride_h = b.stride_w = 2, b.pad_h = b.pad_w = 3, b.h = b.w = 224, b.p = b.q = 112;
      expect(e.can_implement(&b) == SABRE_OK, name, "the 7x7 stride-2 stem at 224x224 should be implementable", e);
    }
    b = a;
    b.x = reinterpret_cast<void*>(0x10002);
    st = e.can_implement(&b);
    expect(align == 1 ? st == SABRE_OK : st == SABRE_NOT_SUPPORTED, name, "a 2-byte offset input is misaligned", e);
    b = a;
    b.filter = nullptr;
    expect(e.can_implement(&b) == SABRE_NOT_SUPPORTED, name, "a NULL filter must be refused", e);
    b = a;
    b.stride_h = 0;
    expect(e.can_implement(&b) == SABRE_NOT_SUPPORTED, name, "stride 0 must be refused", e);
    b = a;
    b.n = 0;
    expect(e.can_implement(&b) == SABRE_OK && e.run(&b, nullptr) == SABRE_OK, name, "n=0 is an empty no-op", e);
    std::printf("%s %s\n", failures ? "checked" : "ok  ", name.c_str());
  }
  return failures ? 1 : 0;
}

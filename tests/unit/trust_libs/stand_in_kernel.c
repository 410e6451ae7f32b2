/* A stand-in GEMM kernel library for tests/unit/trust_test.cpp, no GPU code: one kernel "k" with
 * the kernel ABI's registry, the signature given by -DSIGNATURE (none without it), and a
 * constructor that creates the file $SABRE_TRUST_MARKER names, so a test sees whether the library
 * was ever loaded. */
#include <stdio.h>
#include <stdlib.h>

#include "sabre/kernel_abi.h"

__attribute__((constructor)) static void mark_loaded(void) {
  const char* p = getenv("SABRE_TRUST_MARKER");
  if (p && *p) {
    FILE* f = fopen(p, "w");
    if (f) fclose(f);
  }
}

static int can_implement(const sabre_gemm_args* a) { return a ? SABRE_OK : SABRE_BAD_ARGS; }
static size_t workspace_size(const sabre_gemm_args* a) { return a ? 0 : 0; }
static int run(const sabre_gemm_args* a, sabre_stream_t s) { return a && s ? SABRE_NOT_SUPPORTED : SABRE_BAD_ARGS; }
static const char* last_error(void) { return "stand-in"; }

#ifdef SIGNATURE
const char* k_signature(void) { return SIGNATURE; }
#endif

const sabre_kernel_entry* sabre_kernel_registry(int* count, int* abi_version) {
  static const sabre_kernel_entry entries[] = {{"k", can_implement, workspace_size, run, last_error}};
  *count = 1;
  *abi_version = SABRE_KERNEL_ABI_VERSION;
  return entries;
}

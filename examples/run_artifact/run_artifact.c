/* Loads a compiled artifact with sabre's C API, runs it once on generated host inputs and prints
 * each output's shape and first values. Plain C, no CUDA code: host tensors (kDLCPU) are staged
 * through the context. Exit status: 0 ran, 77 no GPU here (nothing to run on), 2 usage, 1 error.
 *
 *   run_artifact MODEL.sabre [NAME=VALUE ...]   (values of the symbolic dims; default 1)
 *
 * Built against the installed package: see CMakeLists.txt (find_package(sabre)) or
 *   cc run_artifact.c $(pkg-config --cflags --libs sabre) -o run_artifact */
#include <sabre/sabre.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* float -> IEEE half, round to nearest even (inputs here are small and finite). */
static uint16_t to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
  if (exp <= 0) return (uint16_t)sign; /* flush tiny values to zero */
  if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
  uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13), rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return (uint16_t)h;
}

static float from_half(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, x;
  if (exp == 0) {
    float f = (float)mant / 1024.0f / 16384.0f; /* subnormal: mant * 2^-24 */
    return sign ? -f : f;
  }
  x = exp == 31 ? (sign | 0x7f800000u | (mant << 13)) : (sign | ((exp - 15 + 127) << 23) | (mant << 13));
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static float from_bf16(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* Element i of a tensor as a double, for printing. */
static double element(const DLTensor* t, int64_t i) {
  const unsigned char* p = (const unsigned char*)t->data + t->byte_offset;
  size_t bytes = t->dtype.bits / 8;
  switch (t->dtype.code) {
    case kDLFloat:
      if (bytes == 2) return from_half(((const uint16_t*)p)[i]);
      if (bytes == 4) return ((const float*)p)[i];
      return ((const double*)p)[i];
    case kDLBfloat: return from_bf16(((const uint16_t*)p)[i]);
    case kDLInt:
      if (bytes == 8) return (double)((const int64_t*)p)[i];
      if (bytes == 4) return ((const int32_t*)p)[i];
      return ((const int8_t*)p)[i];
    default: return p[i];
  }
}

/* A deterministic, non-zero input value: small integers for index inputs (token ids, masks). */
static void fill(DLTensor* t, int64_t n) {
  size_t bytes = t->dtype.bits / 8;
  for (int64_t i = 0; i < n; ++i) {
    float v = (float)((i * 37 + 11) % 101) / 101.0f - 0.5f;
    unsigned char* p = (unsigned char*)t->data;
    if (t->dtype.code == kDLFloat && bytes == 2) ((uint16_t*)p)[i] = to_half(v);
    else if (t->dtype.code == kDLFloat && bytes == 4) ((float*)p)[i] = v;
    else if (t->dtype.code == kDLBfloat) {
      uint32_t x;
      memcpy(&x, &v, 4);
      ((uint16_t*)p)[i] = (uint16_t)(x >> 16);
    } else if (t->dtype.code == kDLInt && bytes == 8) ((int64_t*)p)[i] = 1 + i % 2;
    else if (t->dtype.code == kDLInt && bytes == 4) ((int32_t*)p)[i] = 1 + (int32_t)(i % 2);
    else memset(p + (size_t)i * bytes, 1, bytes);
  }
}

/* The value of dim string `dim`: a number, or a symbol bound on the command line (default 1). */
static int64_t dim_value(const char* dim, int argc, char** argv) {
  char* end;
  long long v = strtoll(dim, &end, 10);
  if (*dim && !*end) return v;
  size_t len = strlen(dim);
  for (int a = 2; a < argc; ++a)
    if (!strncmp(argv[a], dim, len) && argv[a][len] == '=') return strtoll(argv[a] + len + 1, NULL, 10);
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    fprintf(stderr, "usage: %s MODEL.sabre [NAME=VALUE ...]   (sabre %s)\n", argv[0], sabre_version());
    return 2;
  }
  sabre_session* s = NULL;
  sabre_rt_status st = sabre_session_load(argv[1], 0, &s);
  if (st == SABRE_ERR_NO_DEVICE) {
    printf("skipped: no GPU to run on: %s\n", sabre_last_error());
    return 77;
  }
  if (st != SABRE_SUCCESS) {
    fprintf(stderr, "run_artifact: error: %s\n", sabre_last_error());
    return 1;
  }
  int ni = sabre_session_num_inputs(s), no = sabre_session_num_outputs(s), rc = 0;
  DLTensor* in = calloc((size_t)ni, sizeof(DLTensor));
  DLTensor* out = calloc((size_t)no, sizeof(DLTensor));
  int64_t* shapes = calloc((size_t)ni * 8, sizeof(int64_t));
  for (int i = 0; i < ni; ++i) {
    int nd = sabre_session_input_ndim(s, i);
    if (nd > 8) {
      fprintf(stderr, "run_artifact: input '%s' has %d dims; this example takes up to 8\n", sabre_session_input_name(s, i), nd);
      return 1;
    }
    int64_t n = 1;
    for (int d = 0; d < nd; ++d) n *= shapes[i * 8 + d] = dim_value(sabre_session_input_dim(s, i, d), argc, argv);
    in[i].device.device_type = kDLCPU;
    in[i].dtype = sabre_session_input_dtype(s, i);
    in[i].ndim = nd;
    in[i].shape = shapes + i * 8;
    in[i].data = calloc((size_t)n, in[i].dtype.bits / 8 + 1);
    fill(&in[i], n);
  }
  for (int o = 0; o < no; ++o) out[o].device.device_type = kDLCPU; /* host buffers the context supplies */
  sabre_context* c = NULL;
  if (sabre_context_create(s, NULL, &c) != SABRE_SUCCESS || sabre_run(c, in, ni, out, no, 1) != SABRE_SUCCESS) {
    fprintf(stderr, "run_artifact: error: %s\n", sabre_last_error());
    rc = 1;
  } else {
    for (int o = 0; o < no; ++o) {
      int64_t n = 1;
      printf("%s [", sabre_session_output_name(s, o));
      for (int d = 0; d < out[o].ndim; ++d) {
        printf(d ? ",%lld" : "%lld", (long long)out[o].shape[d]);
        n *= out[o].shape[d];
      }
      printf("]:");
      for (int64_t i = 0; i < n && i < 6; ++i) printf(" %.5g", element(&out[o], i));
      printf(n > 6 ? " ...\n" : "\n");
    }
  }
  sabre_context_free(c);
  sabre_session_free(s);
  for (int i = 0; i < ni; ++i) free(in[i].data);
  free(in);
  free(out);
  free(shapes);
  return rc;
}

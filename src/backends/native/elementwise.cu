// The elementwise-chain interpreter: one kernel for every chain, evaluating bytecode that travels
// as a kernel parameter (the constant bank), so launches on different streams never race.
// Slower than a generated kernel (registers in local memory, a switch per node); it is the
// fallback and the generated kernels' cross-check. Tests: tests/gpu/native_elementwise_test.cpp
#include <stdexcept>

#include "backends/gelu_erf.h"
#include "backends/native/common.cuh"
#include "backends/native/ew_abi.h"
#include "backends/native/ew_device.cuh"

namespace sabre::native {
namespace {

union Reg {
  float f;
  long long i;  // integers and bool (0/1)
};

__device__ __forceinline__ bool is_float_dt(int d) { return d == sabre_ew::kF32 || d == sabre_ew::kF16 || d == sabre_ew::kBF16; }
__device__ __forceinline__ bool is_bool_dt(int d) { return d == sabre_ew::kBool; }

__device__ Reg load(const void* base, long long off, int dt) {
  Reg r;
  switch (dt) {
    case sabre_ew::kF32: r.f = static_cast<const float*>(base)[off]; break;
    case sabre_ew::kF16: r.f = __half2float(static_cast<const __half*>(base)[off]); break;
    case sabre_ew::kBF16: r.f = __bfloat162float(static_cast<const __nv_bfloat16*>(base)[off]); break;
    case sabre_ew::kI64: r.i = static_cast<const long long*>(base)[off]; break;
    case sabre_ew::kI32: r.i = static_cast<const int*>(base)[off]; break;
    case sabre_ew::kI8: r.i = static_cast<const signed char*>(base)[off]; break;
    case sabre_ew::kU8: r.i = static_cast<const unsigned char*>(base)[off]; break;
    default: r.i = static_cast<const bool*>(base)[off] ? 1 : 0; break;
  }
  return r;
}

__device__ void store(void* base, long long i, int dt, Reg r) {
  switch (dt) {
    case sabre_ew::kF32: static_cast<float*>(base)[i] = r.f; break;
    case sabre_ew::kF16: static_cast<__half*>(base)[i] = __float2half_rn(r.f); break;
    case sabre_ew::kBF16: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(r.f); break;
    case sabre_ew::kI64: static_cast<long long*>(base)[i] = r.i; break;
    case sabre_ew::kI32: static_cast<int*>(base)[i] = static_cast<int>(r.i); break;
    case sabre_ew::kI8: static_cast<signed char*>(base)[i] = static_cast<signed char>(r.i); break;
    case sabre_ew::kU8: static_cast<unsigned char*>(base)[i] = static_cast<unsigned char>(r.i); break;
    default: static_cast<bool*>(base)[i] = r.i != 0; break;
  }
}

__device__ long long wrap_int(long long v, int dt) {
  switch (dt) {
    case sabre_ew::kI32: return static_cast<int>(v);
    case sabre_ew::kI8: return static_cast<signed char>(v);
    case sabre_ew::kU8: return static_cast<unsigned char>(v);
    default: return v;
  }
}

__global__ void __launch_bounds__(256) ew_interpret(const SabreEwProgram prog, const SabreEwParams p) {
  detail::pdl_enter();
  Reg reg[SABRE_EW_MAX_NODES];
  long long off[SABRE_EW_MAX_INPUTS];
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; idx < p.n; idx += step) {
    sabre_ew::offsets(p, idx, SABRE_EW_MAX_INPUTS, off);
    for (int k = 0; k < prog.num_nodes; ++k) {
      const SabreEwInstr in = prog.code[k];
      const Reg a = reg[in.a], b = reg[in.b], c = reg[in.c];
      const bool fl = is_float_dt(in.dtype);
      const bool afl = is_float_dt(in.src_dtype);
      Reg r;
      r.i = 0;
      switch (static_cast<EwOp>(in.op)) {
        case EwOp::input: r = load(p.in[in.a], off[in.a], in.dtype); break;
        case EwOp::constant:
          if (fl) r.f = in.alpha;
          else r.i = is_bool_dt(in.dtype) ? (in.alpha != 0.f) : static_cast<long long>(in.alpha);
          break;
        case EwOp::neg: if (fl) r.f = -a.f; else r.i = -a.i; break;
        case EwOp::abs: if (fl) r.f = fabsf(a.f); else r.i = sabre_ew::i_abs(a.i); break;
        case EwOp::exp: r.f = expf(a.f); break;
        case EwOp::log: r.f = logf(a.f); break;
        case EwOp::sqrt: r.f = sqrtf(a.f); break;
        case EwOp::reciprocal: r.f = 1.f / a.f; break;
        case EwOp::erf: r.f = erff(a.f); break;
        case EwOp::tanh: r.f = tanhf(a.f); break;
        case EwOp::relu: r.f = sabre_ew::f_relu(a.f); break;
        case EwOp::sigmoid: r.f = sabre_ew::f_sigmoid(a.f); break;
        case EwOp::gelu_erf: r.f = sabre_ew::f_gelu_erf(a.f); break;
        case EwOp::gelu_tanh: r.f = sabre_ew::f_gelu_tanh(a.f); break;
        case EwOp::silu: r.f = sabre_ew::f_silu(a.f); break;
        case EwOp::leaky_relu: r.f = sabre_ew::f_leaky_relu(a.f, in.alpha); break;
        case EwOp::hard_sigmoid: r.f = sabre_ew::f_hard_sigmoid(a.f, in.alpha, in.beta); break;
        case EwOp::hardswish: r.f = sabre_ew::f_hardswish(a.f); break;
        case EwOp::clip: r.f = sabre_ew::f_clip(a.f, in.alpha, in.beta); break;
        case EwOp::logical_not: r.i = !a.i; break;
        case EwOp::cast:
          if (fl) r.f = sabre_ew::round_to(afl ? a.f : static_cast<float>(a.i), in.dtype);
          else if (is_bool_dt(in.dtype)) r.i = afl ? (a.f != 0.f) : (a.i != 0);
          else r.i = wrap_int(afl ? static_cast<long long>(a.f) : a.i, in.dtype);
          break;
        case EwOp::add: if (fl) r.f = a.f + b.f; else r.i = a.i + b.i; break;
        case EwOp::sub: if (fl) r.f = a.f - b.f; else r.i = a.i - b.i; break;
        case EwOp::mul: if (fl) r.f = a.f * b.f; else r.i = a.i * b.i; break;
        case EwOp::div: if (fl) r.f = a.f / b.f; else r.i = sabre_ew::i_div(a.i, b.i); break;
        case EwOp::pow: r.f = powf(a.f, b.f); break;
        case EwOp::min: if (fl) r.f = sabre_ew::f_min(a.f, b.f); else r.i = sabre_ew::i_min(a.i, b.i); break;
        case EwOp::max: if (fl) r.f = sabre_ew::f_max(a.f, b.f); else r.i = sabre_ew::i_max(a.i, b.i); break;
        case EwOp::equal: r.i = afl ? a.f == b.f : a.i == b.i; break;
        case EwOp::less: r.i = afl ? a.f < b.f : a.i < b.i; break;
        case EwOp::greater: r.i = afl ? a.f > b.f : a.i > b.i; break;
        case EwOp::less_equal: r.i = afl ? a.f <= b.f : a.i <= b.i; break;
        case EwOp::greater_equal: r.i = afl ? a.f >= b.f : a.i >= b.i; break;
        case EwOp::logical_and: r.i = a.i && b.i; break;
        case EwOp::logical_or: r.i = a.i || b.i; break;
        case EwOp::where: r = a.i ? b : c; break;
        case EwOp::sin: r.f = sinf(a.f); break;
        case EwOp::cos: r.f = cosf(a.f); break;
        case EwOp::tan: r.f = tanf(a.f); break;
        case EwOp::asin: r.f = asinf(a.f); break;
        case EwOp::acos: r.f = acosf(a.f); break;
        case EwOp::atan: r.f = atanf(a.f); break;
        case EwOp::sinh: r.f = sinhf(a.f); break;
        case EwOp::cosh: r.f = coshf(a.f); break;
        case EwOp::asinh: r.f = asinhf(a.f); break;
        case EwOp::acosh: r.f = acoshf(a.f); break;
        case EwOp::atanh: r.f = atanhf(a.f); break;
        case EwOp::ceil: r.f = ceilf(a.f); break;
        case EwOp::floor: r.f = floorf(a.f); break;
        case EwOp::round: r.f = rintf(a.f); break;
        case EwOp::softplus: r.f = sabre_ew::f_softplus(a.f); break;
        case EwOp::softsign: r.f = sabre_ew::f_softsign(a.f); break;
        case EwOp::mish: r.f = sabre_ew::f_mish(a.f); break;
        case EwOp::elu: r.f = sabre_ew::f_elu(a.f, in.alpha); break;
        case EwOp::selu: r.f = sabre_ew::f_selu(a.f, in.alpha, in.beta); break;
        case EwOp::celu: r.f = sabre_ew::f_celu(a.f, in.alpha); break;
        case EwOp::thresholded_relu: r.f = sabre_ew::f_thresholded_relu(a.f, in.alpha); break;
        case EwOp::shrink: r.f = sabre_ew::f_shrink(a.f, in.alpha, in.beta); break;
        case EwOp::sign: if (fl) r.f = sabre_ew::f_sign(a.f); else r.i = sabre_ew::i_sign(a.i); break;
        case EwOp::isnan: r.i = a.f != a.f; break;
        case EwOp::isinf: r.i = sabre_ew::f_isinf(a.f, in.alpha, in.beta); break;
        case EwOp::mod: if (fl) r.f = sabre_ew::f_mod(a.f, b.f); else r.i = sabre_ew::i_mod(a.i, b.i); break;
        case EwOp::fmod: if (fl) r.f = fmodf(a.f, b.f); else r.i = sabre_ew::i_fmod(a.i, b.i); break;
        case EwOp::shl: r.i = wrap_int(sabre_ew::i_shl(a.i, b.i), in.dtype); break;
        case EwOp::shr: r.i = sabre_ew::i_shr(a.i, b.i); break;
        case EwOp::prelu: r.f = sabre_ew::f_prelu(a.f, b.f); break;
        default: break;
      }
      reg[k] = r;
    }
    for (int o = 0; o < prog.num_outputs; ++o) {
      const int node = prog.out_node[o];
      store(p.out[o], idx, prog.code[node].dtype, reg[node]);
    }
  }
}

}  // namespace

cudaError_t elementwise_run(const SabreEwProgram& program, const SabreEwParams& params, cudaStream_t stream) {
  if (params.n == 0) return cudaSuccess;
  const unsigned blocks = detail::blocks_for(params.n, 256, 132 * 16);
  SABRE_CUDA_TRY(detail::launch(ew_interpret, blocks, 256, 0, stream, program, params));
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

cudaError_t elementwise_run(const ElementwiseChain& chain, const std::vector<int64_t>& out_dims,
                            const std::vector<std::vector<int64_t>>& in_dims, const std::vector<const void*>& in,
                            const std::vector<void*>& out, cudaStream_t stream) {
  SabreEwProgram prog;
  SabreEwParams params;
  try {
    prog = compile_program(chain);
    params = prepare_params(chain, out_dims, in_dims, in, out);
  } catch (const std::invalid_argument& e) {
    return detail::fail(cudaErrorInvalidValue, e.what());
  }
  return elementwise_run(prog, params, stream);
}

cudaError_t where(DType dt, const void* cond, const std::vector<int64_t>& cond_dims, const void* a,
                  const std::vector<int64_t>& a_dims, const void* b, const std::vector<int64_t>& b_dims, void* y,
                  const std::vector<int64_t>& y_dims, cudaStream_t stream) {
  ElementwiseChain ch;
  ch.inputs = {DType::boolean, dt, dt};
  const int c = ch.input(0), x = ch.input(1), z = ch.input(2);
  ch.outputs = {ch.where(c, x, z)};
  return elementwise_run(ch, y_dims, {cond_dims, a_dims, b_dims}, {cond, a, b}, {y}, stream);
}

namespace {

using detail::bf16;
using detail::half;

// Float-to-float casts (the f16 model's f32 outputs and inputs): 4 elements per thread per step;
// the interpreter kernel moved them at about 30 GB/s.
template <class From, class To>
__global__ void __launch_bounds__(256) cast_floats(const From* __restrict__ x, To* __restrict__ y, long long n) {
  detail::pdl_enter();
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x * 4;
  for (long long i = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) * 4; i < n; i += step) {
    if (i + 4 <= n) {
      From v[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] = x[i + k];
#pragma unroll
      for (int k = 0; k < 4; ++k) y[i + k] = detail::from_float<To>(detail::to_float(v[k]));
    } else {
      for (long long k = i; k < n; ++k) y[k] = detail::from_float<To>(detail::to_float(x[k]));
    }
  }
}

template <class From>
cudaError_t cast_from(DType to, const void* x, void* y, int64_t n, cudaStream_t stream) {
  const unsigned blocks = detail::blocks_for((n + 3) / 4, 256, 132 * 16);
  const auto* in = static_cast<const From*>(x);
  if (to == DType::f32) SABRE_CUDA_TRY(detail::launch(cast_floats<From, float>, blocks, 256, 0, stream, in, static_cast<float*>(y), n));
  else if (to == DType::f16) SABRE_CUDA_TRY(detail::launch(cast_floats<From, half>, blocks, 256, 0, stream, in, static_cast<half*>(y), n));
  else SABRE_CUDA_TRY(detail::launch(cast_floats<From, bf16>, blocks, 256, 0, stream, in, static_cast<bf16*>(y), n));
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

bool float_storage(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

}  // namespace

cudaError_t cast(DType from, DType to, const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n > 0 && float_storage(from) && float_storage(to)) {
    if (from == DType::f32) return cast_from<float>(to, x, y, n, stream);
    if (from == DType::f16) return cast_from<half>(to, x, y, n, stream);
    return cast_from<bf16>(to, x, y, n, stream);
  }
  ElementwiseChain ch;
  ch.inputs = {from};
  ch.outputs = {ch.cast(ch.input(0), to)};
  return elementwise_run(ch, {n}, {{n}}, {x}, {y}, stream);
}

}  // namespace sabre::native

// GatherElements, Trilu and CumSum (index_ops.cu): one thread per output element each, the index
// math on the host-given dims. Their own header, so adding them rebuilds no other kernel file.
// Tests: tests/gpu/native_kernels_test.cpp (GatherElements_*, Trilu_*, CumSum_*)
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ir/dtype.h"

namespace sabre::native {

// y[i] = x[i with its coordinate on `axis` replaced by idx[i]] (ONNX GatherElements; negative
// indices count from the end, out-of-range ones give 0). idx and y have dims `idims`, x `xdims`,
// of one rank; elements of `elem_size` bytes (1, 2, 4 or 8); idx int32 or int64.
cudaError_t gather_elements(size_t elem_size, const void* x, const std::vector<int64_t>& xdims, int64_t axis,
                            const void* idx, ir::DType idx_dtype, const std::vector<int64_t>& idims, void* y,
                            cudaStream_t stream);

// y = x where (upper ? j - i >= k : j - i <= k) over the last two dims (row i, column j), else 0
// (ONNX Trilu). Rank >= 2; elements of `elem_size` bytes (1, 2, 4 or 8).
cudaError_t trilu(size_t elem_size, const void* x, const std::vector<int64_t>& dims, int64_t k, bool upper, void* y,
                  cudaStream_t stream);

// y = running sums of x along `axis` (ONNX CumSum), accumulated in f32 for float types and in
// int64 for i32/i64; exclusive leaves each element out of its own sum, reverse runs from the end.
cudaError_t cumsum(ir::DType dt, const void* x, const std::vector<int64_t>& dims, int64_t axis, bool exclusive,
                   bool reverse, void* y, cudaStream_t stream);

}  // namespace sabre::native

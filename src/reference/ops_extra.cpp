// Losses, quantization and the remaining nn kernels. Tests: tests/unit/reference_index_test.cpp
#include "reference/kernels.h"

namespace sabre::reference::detail {

void register_extra_ops(Table& t) { (void)t; }

}  // namespace sabre::reference::detail

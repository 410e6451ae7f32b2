// Shape inference for losses, quantization and the remaining nn ops (LRN, Det, ...).
// Tests: tests/unit/infer_index_test.cpp
#include "ir/infer_internal.h"

namespace sabre::ir::infer_detail {

void add_extra_ops(Table& t) { (void)t; }

}  // namespace sabre::ir::infer_detail

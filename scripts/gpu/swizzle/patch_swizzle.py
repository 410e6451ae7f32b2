#!/usr/bin/env python3
"""A/B probe, not product code (2026-12-04): rewrites `sabre kernels emit` output of an sm90 GEMM kernel so
that its make_args sets the persistent tile scheduler's swizzle and raster order from SABRE_SWZ
("4", "2M", "1N": swizzle size, then M or N for the raster order; unset keeps CUTLASS's defaults,
swizzle 1 and the heuristic raster). The kernel keeps its name, so gemm_lib_bench can time the
original and this build side by side under each SABRE_SWZ.
Usage: python3 patch_swizzle.py IN.cu OUT.cu"""
import sys

text = open(sys.argv[1]).read()
start = text.index('int make_args(')
ret = text.index('  return SABRE_OK;\n', start)
hook = '''  if (const char* s = std::getenv("SABRE_SWZ")) {  // PROBE: scheduler swizzle and raster order
    using RO = cutlass::gemm::kernel::detail::RasterOrderOptions;
    const int sw = std::atoi(s);
    const char* r = s;
    while (*r >= '0' && *r <= '9') ++r;
    args.scheduler.max_swizzle_size = sw > 0 ? sw : 1;
    args.scheduler.raster_order = *r == 'M' ? RO::AlongM : *r == 'N' ? RO::AlongN : RO::Heuristic;
  }
'''
out = '#include <cstdlib>\n' + text[:ret] + hook + text[ret:]
open(sys.argv[2], 'w').write(out)

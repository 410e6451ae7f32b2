#!/usr/bin/env python3
"""Writes the variants scripts/gpu/epi_probe.sh timed (2026-12-03, eighth session) beside the two
sources they change, which are `sabre kernels emit` output of commit f2cfebb (template version 2):
  sm90_ws_pingpong_tn_f16_f16_f32_128x192x64_c1x1_a8_bias_gelu.cu  (BERT's FFN1 kernel at M=4096)
  sm90_ws_pingpong_tn_f16_f16_f32_128x192x64_c1x1_a8_bias.cu
The other kernels that call timed (coop 256x128 and 128x192 bias_gelu, pingpong 128x192
bias_gelutanh) are that commit's `sabre kernels emit NAME` as they are.
Usage: python3 make_variants.py [DIR]   (default: this script's folder)"""
import os
import re
import sys

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
P = 'sm90_ws_pingpong_tn_f16_f16_f32_128x192x64_c1x1_a8_'
gelu = open(os.path.join(here, P + 'bias_gelu.cu')).read()
bias = open(os.path.join(here, P + 'bias.cu')).read()


def sub(text, old, new):
    assert old in text, old[:60]
    return text.replace(old, new)


LOOP = '    for (int i = 0; i < N; ++i) y[i] = T(sabre_gelu::gelu_erf(float(x[i])));'
AUTO = 'cutlass::epilogue::collective::EpilogueTileAuto'
LINCOMB = ('using FusionOp = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<\n'
           '    SabreGeluErf, ElementD, ElementCompute, ElementD, ElementD, ElementCompute, kAlign, kRound>;')
ARGS = ('  args.epilogue.thread.alpha = p->alpha;\n  args.epilogue.thread.beta = 0.0f;\n'
        '  args.epilogue.thread.bias_ptr = static_cast<const ElementD*>(p->bias);')
LINEAR = ('using namespace cutlass::epilogue::fusion;\n'
          'using ScalarArg = Sm90ScalarBroadcast<ElementCompute, Stride<_0, _0, int64_t>>;\n'
          'using Linear = Sm90EVT<Sm90Compute<cutlass::homogeneous_multiply_add, ElementCompute, ElementCompute, kRound>,\n'
          '                       ScalarArg, Sm90AccFetch,\n'
          '                       Sm90RowBroadcast<0, TileShape, ElementD, ElementCompute, Stride<_0, _1, int64_t>, kAlign>>;\n')
EVT = LINEAR + 'using FusionOp = Sm90EVT<Sm90Compute<SabreGeluErf, ElementD, ElementCompute, kRound>, Linear>;'
EVT_ARGS = ('  args.epilogue.thread = {{{{p->alpha}, {nullptr}, {}}, {}, '
            '{static_cast<const ElementD*>(p->bias), ElementD(0), {}}, {}}, {}};')
# The degree-5 tail of gelu_erf.h's gelu_erf16, in place of the degree-8 one.
i = gelu.index('SABRE_GELU_FN float normal_tail(float a) {')
j = gelu.index('#if defined(__CUDA_ARCH__)', i)
d5 = gelu[:i] + '''SABRE_GELU_FN float normal_tail(float a) {
  float r = -3.66840948e-04f;
  r = fmaf(r, a, 6.27377629e-03f);
  r = fmaf(r, a, -4.97443080e-02f);
  r = fmaf(r, a, -4.62021470e-01f);
  r = fmaf(r, a, -1.15025210e+00f);
  r = fmaf(r, a, -1.0f);
''' + gelu[j:]
evt5 = sub(sub(d5, LINCOMB, EVT), ARGS, EVT_ARGS)
m = re.search(r'using FusionOp = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<\n.*?;', bias, re.S)
bias_evt = sub(sub(bias, m.group(0), LINEAR.replace('ElementCompute, ElementCompute, kRound>,\n', 'ElementD, ElementCompute, kRound>,\n', 1)
                   + 'using FusionOp = Linear;'), ARGS,
               '  args.epilogue.thread = {{{p->alpha}, {nullptr}, {}}, {}, {static_cast<const ElementD*>(p->bias), ElementD(0), {}}, {}};')
variants = {
    'x2alu': ('gelu evaluated twice a value (the epilogue\'s ALU work doubled)',
              sub(gelu, LOOP, '    for (int i = 0; i < N; ++i) y[i] = T(0.5f * (sabre_gelu::gelu_erf(float(x[i])) + '
                              'sabre_gelu::gelu_erf(float(x[i]) * 1.0000001f)));')),
    'identity': ('the functor returns its input (time it against epilogue bias)',
                 sub(gelu, LOOP, '    for (int i = 0; i < N; ++i) y[i] = x[i];')),
    'epi64x64': ('EpilogueTile 64x64 instead of EpilogueTileAuto (64x32)', sub(gelu, AUTO, 'Shape<_64, _64>')),
    'd5': ('gelu tail polynomial of degree 5 (fitted on [0, 4]) instead of 8', d5),
    'evt8': ('EVT act(alpha*acc + bias) without the beta*C term (degree 8)', sub(sub(gelu, LINCOMB, EVT), ARGS, EVT_ARGS)),
    'evt5': ('EVT without beta*C and the degree-5 polynomial', evt5),
    'evt5_64': ('evt5 with EpilogueTile 64x64', sub(evt5, AUTO, 'Shape<_64, _64>')),
    'bias_evt': ('bias only through an EVT without the beta*C term', bias_evt),
}
for name, (note, text) in variants.items():
    with open(os.path.join(here, name + '.cu'), 'w') as f:
        f.write('// VARIANT ' + name + ': ' + note + '\n' + text)
print('wrote', ', '.join(v + '.cu' for v in variants), 'in', here)

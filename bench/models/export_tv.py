#!/usr/bin/env python3
"""Exports torchvision ResNet-50 and MobileNetV2 (random weights from a fixed seed, BatchNorm
variances calibrated on random images, eval mode) to ONNX opset 17 with a dynamic batch, and saves
the PyTorch weights so bench/models/tv_e2e.py can rebuild the same model (issue 7's evidence).

Usage: export_tv.py OUTDIR [resnet50] [mobilenet_v2]     (both by default)"""
import os
import sys
import time

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zoo_models import calibrate_batchnorm  # noqa: E402,F401  (why variances only: its docstring)


def build(name):
    """The model with random weights (seed 0), as tv_e2e.py rebuilds it before loading NAME.pt."""
    torch.manual_seed(0)
    return getattr(torchvision.models, name)(weights=None).eval()


def export(name, outdir):
    model = calibrate_batchnorm(build(name))
    path = os.path.join(outdir, name + ".onnx")
    t0 = time.time()
    with torch.no_grad():
        torch.onnx.export(model, (torch.randn(2, 3, 224, 224),), path, opset_version=17, input_names=["images"],
                          output_names=["logits"], dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}},
                          dynamo=False, do_constant_folding=True)
    torch.save(model.state_dict(), os.path.join(outdir, name + ".pt"))
    print(f"exported {path}: {os.path.getsize(path) / 1e6:.1f} MB in {time.time() - t0:.1f} s "
          f"(torch {torch.__version__}, torchvision {torchvision.__version__})", flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    os.makedirs(sys.argv[1], exist_ok=True)
    for name in sys.argv[2:] or ["resnet50", "mobilenet_v2"]:
        export(name, sys.argv[1])

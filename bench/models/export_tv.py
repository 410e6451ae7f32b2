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


def build(name):
    """The model with random weights (seed 0), as tv_e2e.py rebuilds it before loading NAME.pt."""
    torch.manual_seed(0)
    return getattr(torchvision.models, name)(weights=None).eval()


def calibrate_batchnorm(model, images=64, batch=16):
    """Sets each BatchNorm's running variance to that of its input over random images, keeping the
    running mean at 0. The weights stay random. Why, measured with torch on the CPU (batch 2, fp16
    output vs fp32 output, relative L2):
      - default statistics (mean 0, variance 1): MobileNetV2's activations shrink block by block to
        about 1e-9, where fp16 underflows: 1.0, all noise. ResNet-50: 6.9e-4.
      - full calibration (means too): both become ill-conditioned, because channels with tiny variance
        get gains near 1/sqrt(eps) after the mean is subtracted: ResNet-50 3.1e-2, MobileNetV2 1.8e-2.
        Then no fp16 implementation can match another within 1e-2.
      - variances only (this): ResNet-50 8.5e-4, MobileNetV2 1.9e-3."""
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the calibration batches
    model.train()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _ in range(images // batch):
            model(torch.randn(batch, 3, 224, 224, generator=g))
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.running_mean.zero_()
    return model.eval()


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

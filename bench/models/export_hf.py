#!/usr/bin/env python3
"""Exports HuggingFace BERT-base (BertModel, default config) and GPT-2 small (GPT2Model, default
config), random weights from a fixed seed, to ONNX opset 17 with dynamic batch and sequence, and
saves the PyTorch weights next to them so bench/models/compare_torch.py can rebuild the same model.

Usage: export_hf.py OUTDIR [bert] [gpt2]     (both by default)
Writes OUTDIR/{bert_base,gpt2}.onnx (+ .onnx.data when the exporter splits weights out) and
OUTDIR/{bert_base,gpt2}.pt. Needs torch, transformers and onnx (the GPU host has them)."""
import os
import sys
import time

import torch
import transformers


def build(name):
    torch.manual_seed(0)
    if name == "bert_base":
        model = transformers.BertModel(transformers.BertConfig())
        inputs = ("input_ids", "attention_mask", "token_type_ids")
        outputs = ("last_hidden_state", "pooler_output")
    else:
        cfg = transformers.GPT2Config()
        cfg.use_cache = False
        model = transformers.GPT2Model(cfg)
        inputs = ("input_ids", "attention_mask")
        outputs = ("last_hidden_state",)
    # The eager attention path: the one every exporter and runtime understands.
    model.config._attn_implementation = "eager"
    return model.eval(), inputs, outputs


def example(name, inputs, batch=2, seq=16):
    g = torch.Generator().manual_seed(1)
    vocab = 30522 if name == "bert_base" else 50257
    ex = {"input_ids": torch.randint(0, vocab, (batch, seq), generator=g),
          "attention_mask": torch.ones(batch, seq, dtype=torch.int64)}
    if "token_type_ids" in inputs:
        ex["token_type_ids"] = torch.zeros(batch, seq, dtype=torch.int64)
    return tuple(ex[k] for k in inputs)


class Wrapper(torch.nn.Module):
    """Positional inputs in a fixed order, plain tuple outputs (no ModelOutput, no cache)."""

    def __init__(self, model, inputs, outputs):
        super().__init__()
        self.model, self.inputs, self.outputs = model, inputs, outputs

    def forward(self, *args):
        out = self.model(**dict(zip(self.inputs, args)), return_dict=True)
        return tuple(out[k] for k in self.outputs)


def export(name, outdir):
    model, inputs, outputs = build(name)
    path = os.path.join(outdir, name + ".onnx")
    axes = {k: {0: "batch", 1: "seq"} for k in inputs}
    axes.update({k: {0: "batch", 1: "seq"} for k in outputs if k != "pooler_output"})
    if "pooler_output" in outputs:
        axes["pooler_output"] = {0: "batch"}
    t0 = time.time()
    with torch.no_grad():
        torch.onnx.export(Wrapper(model, inputs, outputs), example(name, inputs), path, opset_version=17,
                          input_names=list(inputs), output_names=list(outputs), dynamic_axes=axes,
                          dynamo=False, do_constant_folding=True)
    torch.save(model.state_dict(), os.path.join(outdir, name + ".pt"))
    size = sum(os.path.getsize(os.path.join(outdir, f)) for f in os.listdir(outdir) if f.startswith(name + ".onnx"))
    print(f"exported {path}: {size / 1e6:.1f} MB in {time.time() - t0:.1f} s (torch {torch.__version__}, "
          f"transformers {transformers.__version__})", flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    for name in sys.argv[2:] or ["bert", "gpt2"]:
        export({"bert": "bert_base", "gpt2": "gpt2"}[name], outdir)

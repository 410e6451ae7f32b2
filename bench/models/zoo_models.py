"""The model zoo as data: one Entry per architecture, built from default transformers / torchvision configs
with random weights from a fixed seed (never downloaded), plus what bench/zoo.py needs to export, feed and
compare them. torch, transformers and torchvision are imported inside the builders, so the table can be
listed (and bench/zoo.py's report run) without them.

Inputs are named as the ONNX exports name them; symbolic dims are "batch" and, for token models, "seq",
matching `sabre compile --dynamic`."""
from dataclasses import dataclass
from typing import Callable, Tuple


@dataclass(frozen=True)
class Entry:
    name: str
    family: str  # encoder | decoder | vision-transformer | cnn | speech | smoke
    source: str  # transformers | torchvision
    build: Callable  # () -> torch.nn.Module in eval mode, random weights from seed 0 (BatchNorm calibrated)
    kind: str  # tokens | image | audio: how example inputs are made
    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]
    dynamic: str  # `sabre compile --dynamic`
    check: Tuple[Tuple[int, int], ...]  # (batch, seq) compared with PyTorch; seq 0 where there is none
    batches: Tuple[int, ...] = (1, 32)  # timed
    seq: int = 0  # the timed sequence length (token models)
    vocab: int = 0
    image: int = 224
    channels_last: bool = False  # PyTorch runs it NHWC (torchvision CNNs: its fast path on tensor cores)
    skip: str = ""  # why the harness leaves it out ("" = runs)
    notes: str = ""


TEXT_DYN = "batch=1..32,seq=1..128"
IMG_DYN = "batch=1..32"
# Between the tuned buckets (3, 77, 100, 24) and at the edges (1 and 32 at 128).
TEXT_CHECK = ((1, 128), (3, 77), (24, 100), (32, 128))
IMG_CHECK = ((1, 0), (3, 0), (32, 0))


def _hf(model_cls, config_cls, encoder_only=False, **cfg):
    def build():
        import torch
        import transformers
        torch.manual_seed(0)
        model = getattr(transformers, model_cls)(getattr(transformers, config_cls)(**cfg))
        if encoder_only:
            model = model.get_encoder()
        # The eager attention path: the one every exporter and runtime understands.
        model.config._attn_implementation = "eager"
        return model.eval()
    return build


def _tv(name, calibrate=True, **kw):
    def build():
        import torch
        import torchvision
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None, **kw).eval()
        return calibrate_batchnorm(model) if calibrate else model
    return build


def _convnext_tiny():
    import torch
    model = _tv("convnext_tiny", calibrate=False)()
    # The default layer scale (1e-6) makes every block a near no-op on random weights, so a wrong block
    # would not show in the output; scales in [0.1, 0.3] make each block count.
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for m in model.modules():
            if hasattr(m, "layer_scale") and isinstance(m.layer_scale, torch.nn.Parameter):
                m.layer_scale.copy_(0.1 + 0.2 * torch.rand(m.layer_scale.shape, generator=g))
    return model


def _mobilevit():
    model = _hf("MobileViTModel", "MobileViTConfig")()
    return calibrate_batchnorm(model, image=256)


def calibrate_batchnorm(model, images=64, batch=16, image=224):
    """Sets each BatchNorm's running variance to that of its input over random images, keeping the
    running mean at 0. The weights stay random. Why, measured with torch on the CPU (batch 2, fp16
    output vs fp32 output, relative L2):
      - default statistics (mean 0, variance 1): MobileNetV2's activations shrink block by block to
        about 1e-9, where fp16 underflows: 1.0, all noise. ResNet-50: 6.9e-4.
      - full calibration (means too): both become ill-conditioned, because channels with tiny variance
        get gains near 1/sqrt(eps) after the mean is subtracted: ResNet-50 3.1e-2, MobileNetV2 1.8e-2.
        Then no fp16 implementation can match another within 1e-2.
      - variances only (this): ResNet-50 8.5e-4, MobileNetV2 1.9e-3."""
    import torch
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return model
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the calibration batches
    model.train()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _ in range(images // batch):
            model(torch.randn(batch, 3, image, image, generator=g))
    for m in bns:
        m.running_mean.zero_()
    return model.eval()


TOK = ("input_ids", "attention_mask")
HID = ("last_hidden_state",)
HID_POOL = ("last_hidden_state", "pooler_output")


def _text(name, family, model_cls, config_cls, vocab, inputs=TOK, outputs=HID, **cfg):
    return Entry(name, family, "transformers", _hf(model_cls, config_cls, **cfg), "tokens", inputs, outputs,
                 TEXT_DYN, TEXT_CHECK, seq=128, vocab=vocab)


def _cnn(name, **kw):
    return Entry(name, "cnn", "torchvision", kw.pop("build", None) or _tv(name), "image", ("images",),
                 ("logits",), IMG_DYN, IMG_CHECK, channels_last=True, **kw)


ZOO = [
    _text("bert_base", "encoder", "BertModel", "BertConfig", 30522, inputs=TOK + ("token_type_ids",),
          outputs=HID_POOL),
    _text("distilbert", "encoder", "DistilBertModel", "DistilBertConfig", 30522),
    _text("gpt2", "decoder", "GPT2Model", "GPT2Config", 50257, use_cache=False),
    # A Llama-style decoder's prefill: RMSNorm, SwiGLU, rotary, grouped-query attention (16 query heads
    # sharing 4 KV heads), causal mask.
    _text("llama_gqa", "decoder", "LlamaModel", "LlamaConfig", 32000, vocab_size=32000, hidden_size=1024,
          intermediate_size=2816, num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=4,
          max_position_embeddings=2048, use_cache=False),
    Entry("vit_b16", "vision-transformer", "transformers", _hf("ViTModel", "ViTConfig"), "image", ("pixel_values",),
          HID_POOL, IMG_DYN, IMG_CHECK, notes="ViT-B/16 at 224: 197 tokens, no mask"),
    Entry("swin_t", "vision-transformer", "torchvision", _tv("swin_t", calibrate=False), "image", ("images",),
          ("logits",), IMG_DYN, IMG_CHECK, notes="windowed attention (7x7, shifted), relative position bias"),
    Entry("clip_vit_b32", "vision-transformer", "transformers", _hf("CLIPVisionModel", "CLIPVisionConfig"), "image",
          ("pixel_values",), HID_POOL, IMG_DYN, IMG_CHECK, notes="CLIP's vision encoder: 50 tokens, quick GELU"),
    Entry("whisper_tiny_enc", "speech", "transformers", _hf("WhisperModel", "WhisperConfig", encoder_only=True),
          "audio", ("input_features",), HID, IMG_DYN, IMG_CHECK,
          notes="Whisper's default (tiny) encoder: 80 mel bins x 3000 frames -> 1500 positions"),
    _cnn("resnet50"),
    _cnn("mobilenet_v2"),
    _cnn("efficientnet_b0", notes="squeeze-excite, SiLU"),
    _cnn("convnext_tiny", build=_convnext_tiny, notes="depthwise 7x7, channels-last LayerNorm, layer scale"),
    _cnn("resnext50_32x4d", notes="grouped 3x3 convs, 32 groups"),
    _cnn("regnet_y_400mf", notes="grouped convs, squeeze-excite; with random weights its fp16 output is "
         "ill-conditioned (on the CPU its fp32 output is 8e-3 from fp64, bf16 0.4)"),
    _cnn("regnet_x_400mf", notes="grouped convs, no squeeze-excite: a RegNet whose fp16 output is well-conditioned"),
    Entry("mobilevit_s", "vision-transformer", "transformers", _mobilevit, "image", ("pixel_values",), HID_POOL,
          IMG_DYN, IMG_CHECK, image=256, notes="MobileViT-S at 256: convs, unfold into patches, attention"),
    # Not part of the zoo: a two-layer BERT for trying the harness end to end in a minute.
    _text("bert_tiny", "smoke", "BertModel", "BertConfig", 30522, inputs=TOK + ("token_type_ids",),
          outputs=HID_POOL, hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512),
]
BY_NAME = {e.name: e for e in ZOO}
DEFAULT = [e.name for e in ZOO if e.family != "smoke" and not e.skip]


def select(spec):
    """Entries named by SPEC: comma-separated names or families ("cnn"), "all" (the zoo without the smoke
    model) or None (the same). Raises ValueError naming what is unknown."""
    if not spec or spec == "all":
        return [BY_NAME[n] for n in DEFAULT]
    out = []
    for word in spec.split(","):
        word = word.strip()
        hit = [e for e in ZOO if e.name == word or e.family == word]
        if not hit:
            raise ValueError(f"unknown model or family '{word}' (known: {', '.join(BY_NAME)}; families: "
                             f"{', '.join(sorted({e.family for e in ZOO}))})")
        out += [e for e in hit if e not in out]
    return out


def wrap(entry, model):
    """MODEL as a module taking positional inputs in the entry's order and returning a plain tuple of
    outputs (no ModelOutput, no cache), so torch.onnx.export names them."""
    import torch

    class _Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            if entry.source == "torchvision":
                return (self.model(*args),)
            out = self.model(**dict(zip(entry.inputs, args)), return_dict=True)
            return tuple(out[k] for k in entry.outputs)

    return _Wrapper().eval()


def make_inputs(entry, batch, seq, seed):
    """Random inputs as {name: CPU tensor}: token ids, right-padded attention masks (row i keeps its first
    seq - i*seq//(2*batch) tokens), token types; images and mel features from a normal distribution."""
    import torch
    g = torch.Generator().manual_seed(seed)
    if entry.kind == "tokens":
        mask = torch.ones(batch, seq, dtype=torch.int64)
        for i in range(1, batch):
            mask[i, seq - (i * seq) // (2 * batch):] = 0
        ex = {"input_ids": torch.randint(0, entry.vocab, (batch, seq), generator=g), "attention_mask": mask,
              "token_type_ids": torch.randint(0, 2, (batch, seq), generator=g)}
        return {k: ex[k] for k in entry.inputs}
    if entry.kind == "audio":
        return {entry.inputs[0]: torch.randn(batch, 80, 3000, generator=g)}
    return {entry.inputs[0]: torch.randn(batch, 3, entry.image, entry.image, generator=g)}


def dynamic_axes(entry):
    """torch.onnx.export's dynamic_axes: batch everywhere, seq on token inputs and on token models' hidden
    states."""
    axes = {}
    for k in entry.inputs:
        axes[k] = {0: "batch", 1: "seq"} if entry.kind == "tokens" else {0: "batch"}
    for k in entry.outputs:
        axes[k] = {0: "batch", 1: "seq"} if entry.kind == "tokens" and k == "last_hidden_state" else {0: "batch"}
    return axes


def table_lines():
    """The zoo as a plain-text table (zoo.py list)."""
    rows = [("name", "family", "source", "--dynamic", "checked (batch:seq)", "timed batches", "notes / skipped")]
    for e in ZOO:
        chk = " ".join(f"{b}:{s}" if s else str(b) for b, s in e.check)
        timed = ",".join(map(str, e.batches)) + (f" @seq {e.seq}" if e.seq else "")
        rows.append((e.name, e.family, e.source, e.dynamic, chk, timed,
                     ("SKIPPED: " + e.skip) if e.skip else e.notes))
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(c.ljust(w[i]) for i, c in enumerate(r[:-1])) + "  " + r[-1] for r in rows]

#!/usr/bin/python3
"""Exports Lumen's model zoo: torchvision classifiers and a few small home-made models, with random
weights, to ONNX (opset 13 unless --opset says, dynamic batch axis), with one fixed input and
PyTorch's output on it.

    /usr/bin/python3 tests/models/export_zoo.py OUTDIR [--models a,b,...] [--force] [--opset N]

writes OUTDIR/NAME.onnx, OUTDIR/NAME.input.npy (batch 1, or 64 for the MLP) and
OUTDIR/NAME.expected.npy for each model; a model whose three files exist is skipped unless --force.
Needs Debian's python3 with torch 1.13 and torchvision 0.14; no download (weights are random).
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn as nn
import torchvision.models as tvm

warnings.filterwarnings("ignore")

OPSET = 13


class MLP(nn.Module):
    """20 Linear layers of width 1024, ReLU between them."""

    def __init__(self, width=1024, depth=20):
        super().__init__()
        layers = []
        for i in range(depth):
            layers.append(nn.Linear(width, width))
            if i + 1 < depth:
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)
        for m in self.net:
            if isinstance(m, nn.Linear):  # He init, so the signal neither vanishes nor explodes
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                nn.init.normal_(m.bias, 0, 0.1)

    def forward(self, x):
        return self.net(x)


class Transformer(nn.Module):
    """BERT-like encoder (causal=False: post-norm) or GPT-like decoder (causal=True: pre-norm, causal
    mask): token and learned position embeddings, nn.TransformerEncoder (batch_first, GELU), final
    LayerNorm; the GPT one adds a language-model head over the vocabulary. With dynamic_seq (encoders
    only) the position table holds `seq` rows and the first len(ids) of them are used, so the model
    takes any sequence length up to `seq`."""

    def __init__(self, causal, vocab, seq, d, heads, layers, dynamic_seq=False):
        super().__init__()
        self.causal = causal
        self.dynamic_seq = dynamic_seq
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, seq, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.0,
                                           activation="gelu", batch_first=True,
                                           norm_first=causal)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        # TransformerEncoder deep-copies one layer, so every layer would start with the same
        # weights (and the exporter would store them once): draw each layer's weights anew.
        for name, p in self.encoder.named_parameters():
            with torch.no_grad():
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)
                elif "norm" in name and name.endswith("weight"):
                    p.uniform_(0.8, 1.2)
                else:
                    p.normal_(0, 0.02)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab) if causal else None
        mask = torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask if causal else None)

    def forward(self, ids):
        x = self.tok(ids) + (self.pos[:, :ids.shape[1]] if self.dynamic_seq else self.pos)
        x = self.encoder(x, mask=self.mask) if self.causal else self.encoder(x)
        x = self.norm(x)
        return self.head(x) if self.head is not None else x


class PaddedEncoder(Transformer):
    """The BERT-like encoder over a batch of sentences of different lengths, padded at the end with
    token 0: the key-padding mask is derived from the ids (ids == 0), as a serving stack does, so
    padded keys take no attention weight. The outputs at padded positions are computed too."""

    pad_id = 0

    def forward(self, ids):
        x = self.tok(ids) + self.pos
        x = self.encoder(x, src_key_padding_mask=ids == self.pad_id)
        return self.norm(x)


class WideDeep(nn.Module):
    """Wide & Deep (Cheng et al. 2016), the recommender's shape: one row per candidate holding
    `dense` dense features followed by `cross` hashed cross-product features (multi-hot). The wide
    part is a linear model over the whole row; the deep part an MLP over the dense features; the
    output the sigmoid of the sum of their logits. The wide part reads the large input once and
    does little with it; the deep part does the arithmetic on a small slice of it."""

    def __init__(self, dense=1024, cross=99328, hidden=(4096, 4096, 1024)):
        super().__init__()
        self.dense = dense
        self.wide = nn.Linear(dense + cross, 1)
        layers, width = [], dense
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 1))
        self.deep = nn.Sequential(*layers)
        for m in self.deep:
            if isinstance(m, nn.Linear):  # He init, as for the MLP
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                nn.init.normal_(m.bias, 0, 0.1)
        with torch.no_grad():  # the two logits of comparable size
            self.deep[-1].weight.mul_(0.05)

    def forward(self, x):
        return torch.sigmoid(self.wide(x) + self.deep(x[:, :self.dense]))


def vit_b_16():
    m = tvm.vit_b_16()
    # torchvision zero-initialises the ViT head, which would make every output 0.
    with torch.no_grad():
        m.heads.head.weight.normal_(0, 0.02)
        m.heads.head.bias.normal_(0, 0.02)
    return m


IMAGE = (1, 3, 224, 224)
# name -> (constructor, input name, input shape, input dtype)
MODELS = {
    "resnet18": (lambda: tvm.resnet18(), "input", IMAGE, "float32"),
    "mobilenet_v2": (lambda: tvm.mobilenet_v2(), "input", IMAGE, "float32"),
    "squeezenet1_1": (lambda: tvm.squeezenet1_1(), "input", IMAGE, "float32"),
    "shufflenet_v2_x1_0": (lambda: tvm.shufflenet_v2_x1_0(), "input", IMAGE, "float32"),
    "mobilenet_v3_small": (lambda: tvm.mobilenet_v3_small(), "input", IMAGE, "float32"),
    "efficientnet_b0": (lambda: tvm.efficientnet_b0(), "input", IMAGE, "float32"),
    "googlenet": (lambda: tvm.googlenet(aux_logits=False, init_weights=True), "input", IMAGE,
                  "float32"),
    "regnet_y_400mf": (lambda: tvm.regnet_y_400mf(), "input", IMAGE, "float32"),
    "densenet121": (lambda: tvm.densenet121(), "input", IMAGE, "float32"),
    "resnet50": (lambda: tvm.resnet50(), "input", IMAGE, "float32"),
    "convnext_tiny": (lambda: tvm.convnext_tiny(), "input", IMAGE, "float32"),
    "vit_b_16": (vit_b_16, "input", IMAGE, "float32"),
    # Swin-T (Liu et al. 2021): shifted windows (roll), window partition, relative position bias.
    "swin_t": (lambda: tvm.swin_t(), "input", IMAGE, "float32"),
    "mlp20": (lambda: MLP(), "input", (64, 1024), "float32"),
    # Wide & Deep over 1024 dense and 99328 hashed cross features, deep tower 4096-4096-1024.
    "wide_deep": (lambda: WideDeep(), "input", (1, 100352), "float32"),
    # BERT-base-like: 12 layers, d=768, 12 heads, seq 128, BERT's vocabulary size.
    "bert_base": (lambda: Transformer(False, vocab=30522, seq=128, d=768, heads=12, layers=12),
                  "input_ids", (1, 128), "int64"),
    # The same at batch 8, sequence 256, each sentence padded (token 0) from a random length on.
    "bert_padded": (lambda: PaddedEncoder(False, vocab=30522, seq=256, d=768, heads=12, layers=12),
                    "input_ids", (8, 256), "int64"),
    # The same with a dynamic sequence axis (1..512): one session for every sentence length.
    "bert_base_dynamic": (lambda: Transformer(False, vocab=30522, seq=512, d=768, heads=12,
                                              layers=12, dynamic_seq=True),
                          "input_ids", (1, 128), "int64"),
    "bert_tiny_dynamic": (lambda: Transformer(False, vocab=1000, seq=64, d=256, heads=4, layers=2,
                                              dynamic_seq=True),
                          "input_ids", (1, 32), "int64"),
    # GPT-2-small-like: 12 pre-norm causal layers, d=768, 12 heads, seq 128, GPT-2's vocabulary.
    "gpt2_small": (lambda: Transformer(True, vocab=50257, seq=128, d=768, heads=12, layers=12),
                   "input_ids", (1, 128), "int64"),
    # Small versions of both, quick to debug with.
    "bert_tiny": (lambda: Transformer(False, vocab=1000, seq=32, d=256, heads=4, layers=2),
                  "input_ids", (1, 32), "int64"),
    "gpt_tiny": (lambda: Transformer(True, vocab=1000, seq=32, d=256, heads=4, layers=2),
                 "input_ids", (1, 32), "int64"),
}


def calibrate_batchnorm(model, shape):
    """Random init leaves BatchNorm's running statistics at mean 0, variance 1, whatever the
    activations are; in several torchvision models (googlenet, shufflenet, mobilenet, efficientnet)
    the signal then vanishes and the output is just the classifier's bias, which would test nothing.
    One forward pass on a calibration image (not the test input), BatchNorm in training mode with
    cumulative statistics, sets each layer's running mean and variance to what it actually sees;
    the affine parameters are randomised too, so folding them into Conv is exercised."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None
        with torch.no_grad():
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.normal_(0, 0.1)
        bn.train()
    with torch.no_grad():
        model(torch.from_numpy(np.random.RandomState(99).standard_normal(shape).astype(np.float32)))
    model.eval()


def make_input(shape, dtype, vocab=1000, pad_id=None):
    """Random values; with pad_id, ids of sentences of random lengths (a quarter to all of the
    sequence), padded at the end with pad_id."""
    rng = np.random.RandomState(1234)
    if dtype == "int64" and pad_id is not None:
        ids = rng.randint(pad_id + 1, vocab, size=shape).astype(np.int64)
        for row in ids.reshape(-1, shape[-1]):
            row[rng.randint(shape[-1] // 4, shape[-1] + 1):] = pad_id
        return ids
    if dtype == "int64":
        return rng.randint(0, vocab, size=shape).astype(np.int64)
    return rng.standard_normal(shape).astype(np.float32)


def dynamic_axes(model, input_name):
    """The batch axis, and the sequence axis of a dynamic-sequence encoder."""
    axes = {0: "batch"}
    if getattr(model, "dynamic_seq", False):
        axes[1] = "sequence"
    return {input_name: axes, "output": dict(axes)}


def export(name, outdir, force):
    onnx_path = os.path.join(outdir, name + ".onnx")
    in_path = os.path.join(outdir, name + ".input.npy")
    exp_path = os.path.join(outdir, name + ".expected.npy")
    if not force and all(os.path.exists(p) for p in (onnx_path, in_path, exp_path)):
        print(f"{name}: already exported")
        return
    ctor, input_name, shape, dtype = MODELS[name]
    t0 = time.time()
    torch.manual_seed(0)
    model = ctor().eval()
    if dtype == "float32":
        calibrate_batchnorm(model, shape)
    vocab = model.tok.num_embeddings if isinstance(model, Transformer) else 1000
    x = make_input(shape, dtype, vocab, getattr(model, "pad_id", None))
    xt = torch.from_numpy(x)
    with torch.no_grad():
        expected = model(xt)
        # A model whose output hardly depends on its input (vanishing signal) tests nothing.
        other = model(torch.from_numpy(x.ravel()[::-1].reshape(shape).copy()))
        sensitivity = float((expected - other).abs().max() / expected.abs().max())
        t1 = time.time()
        reps = 3
        for _ in range(reps):
            model(xt)
        torch_ms = (time.time() - t1) / reps * 1000
    # Exported with autograd on: under no_grad, nn.TransformerEncoderLayer takes its fused "fast
    # path" (aten::_transformer_encoder_layer_fwd), which has no ONNX export.
    tmp = onnx_path + ".tmp"
    # PyTorch 2's default exporter is the dynamo one; the TorchScript exporter writes the same
    # graphs at every opset it knows (Debian's PyTorch 1.13 has no choice to make).
    kwargs = {"dynamo": False} if int(torch.__version__.split(".")[0]) >= 2 else {}
    torch.onnx.export(model, (xt,), tmp, opset_version=OPSET, input_names=[input_name],
                      output_names=["output"],
                      dynamic_axes=dynamic_axes(model, input_name),
                      do_constant_folding=True, **kwargs)
    np.save(in_path, x)
    np.save(exp_path, expected.numpy())
    os.replace(tmp, onnx_path)  # last, so a half-done export is redone next time
    print(f"{name}: exported in {time.time() - t0:.1f} s; output {tuple(expected.shape)}, "
          f"max |output| {float(expected.abs().max()):.3g}, relative change on another input "
          f"{sensitivity:.2g}; pytorch latency {torch_ms:.2f} ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--opset", type=int, default=OPSET,
                    help="ONNX opset to export at (Debian's PyTorch 1.13 writes up to 17)")
    args = ap.parse_args()
    globals()["OPSET"] = args.opset
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        sys.exit(f"unknown models: {', '.join(unknown)}; known: {', '.join(MODELS)}")
    os.makedirs(args.outdir, exist_ok=True)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    for name in names:
        export(name, args.outdir, args.force)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Exports the decoders of decoder_models.py (random weights) to ONNX with a key/value cache, and
writes PyTorch's greedy continuations as references.

    /usr/bin/python3 tests/models/export_decoders.py OUTDIR [--models gpt2,llama,gpt2-attention23]
        [--tiny] [--force] [--check] [--threads N]

Models: `gpt2` (GPT-2 small-like: 12 layers, d=768, 12 heads, learned positions up to 1024,
vocabulary 50257, untied head), `llama` (Llama-like, about 0.5 B parameters: 24 layers, d=1024,
16 query / 4 key-value heads, rotary positions, RMSNorm, SwiGLU 5120, vocabulary 32000, untied
head; its weights go to NAME.onnx.data) and `gpt2-attention23` (the gpt2 weights in a graph
written with onnx.helper around ONNX's opset-23 Attention op, past_key/past_value in and
present_key/present_value out); --tiny picks `gpt2-tiny`, `llama-tiny` and
`gpt2-attention23-tiny` (2 layers, d=64, vocabulary 1000) for tests. Names may also be given
with -tiny directly.

The TorchScript exporter writes opset 17 (torch 1.13 here; torch 2's `dynamo=False`);
gpt2-attention23 has opset 23, IR version 10 (Debian's onnx 1.12 cannot check it). Inputs
input_ids / position_ids int64 [batch, seq], attention_mask int64 [batch, total_seq],
past_key_values.N.key / .value float32 [batch, kv_heads, past_seq, head_dim]; outputs logits
[batch, seq, vocab], present.N.key / .value [batch, kv_heads, total_seq, head_dim].

Per model, beside NAME.onnx: NAME.prompt.npy (int64 [1, 12]) and NAME.greedy.npy (its greedy
continuation, int64 [1, 64]); NAME.prompt2.npy / NAME.mask2.npy (two prompts of 13 and 9 tokens,
the second left-padded with id 0 and mask 0) and NAME.greedy2.npy ([2, 64]); NAME.json (config,
parameter count, the smallest best-to-second logit gap of the references, distinct tokens). Each
prompt is drawn from a fixed seed, the next seed being tried while some greedy step's gap is
below 1e-3, so a runtime's float rounding cannot flip a reference token. A model whose files
exist is skipped unless --force.

--check runs each ONNX file in ONNX Runtime (onnxruntime-node from bench/ort/node_modules, or
Python onnxruntime where importable): the prompt's logits and the first decode step's logits
against PyTorch's, and the 64-token greedy continuations (batch 1 and the padded batch 2).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decoder_models as dm  # noqa: E402

warnings.filterwarnings("ignore")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPSET = 17
NEW_TOKENS = 64
MIN_GAP = 1e-3
BASE_MODELS = ("gpt2", "llama", "gpt2-attention23")
EXTERNAL_DATA_BYTES = 1 << 30  # weights above this go to NAME.onnx.data


def base_config(name):
    """The decoder_models config behind a model name ("gpt2-attention23-tiny" -> "gpt2-tiny")."""
    return name.replace("-attention23", "")


def parameter_count(model):
    return sum(p.numel() for p in model.parameters())


def dynamic_axes(layers):
    inputs, outputs = dm.io_names(layers)
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total_seq"},
            "position_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    for name in inputs[3:]:
        axes[name] = {0: "batch", 2: "past_seq"}
    for name in outputs[1:]:
        axes[name] = {0: "batch", 2: "total_seq"}
    return axes


def save_model(proto, path):
    """Saves an onnx ModelProto; weights go to PATH.data when they exceed EXTERNAL_DATA_BYTES."""
    import onnx
    data = path + ".data"
    if os.path.exists(data):
        os.remove(data)
    big = sum(t.ByteSize() for t in proto.graph.initializer) > EXTERNAL_DATA_BYTES
    if big:
        onnx.save_model(proto, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=os.path.basename(data), size_threshold=1024)
    else:
        onnx.save_model(proto, path)


def export_torch(model, path):
    """Exports a decoder_models.Decoder with the TorchScript exporter (traced at batch 2, 5 new
    tokens after 3 past slots, so no dimension is specialised to 1 or 0)."""
    import onnx
    c = model.c
    inputs, outputs = dm.io_names(c.layers)
    ids = torch.randint(0, c.vocab, (2, 5))
    mask = torch.ones(2, 8, dtype=torch.long)
    pos = torch.arange(3, 8).repeat(2, 1)
    past = [torch.randn(2, c.kv_heads, 3, c.head_dim) for _ in range(2 * c.layers)]
    kwargs = {"dynamo": False} if int(torch.__version__.split(".")[0]) >= 2 else {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = os.path.join(tmp, "model.onnx")
        with torch.no_grad():
            torch.onnx.export(model, (ids, mask, pos, *past), tmp_path, opset_version=OPSET,
                              input_names=inputs, output_names=outputs,
                              dynamic_axes=dynamic_axes(c.layers), do_constant_folding=True,
                              **kwargs)
        proto = onnx.load(tmp_path)  # also reads external data the exporter may have written
    save_model(proto, path)


def attention23_graph(model):
    """The GPT-2 decoder `model` as an opset-23 graph around ONNX's Attention op (3-D Q/K/V,
    q_num_heads = kv_num_heads, is_causal=1 with past_key/past_value, a float additive mask
    [batch, 1, seq, total_seq] from attention_mask), LayerNormalization and Gelu(tanh)."""
    from onnx import TensorProto, helper, numpy_helper
    c = model.c
    assert c.arch == "gpt2" and c.kv_heads == c.heads
    w = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    inits, nodes = [], []

    def init(name, array):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(op, ins, outs, **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=f"{op}_{len(nodes)}", **attrs))
        return outs[0] if len(outs) == 1 else outs

    def linear(x, prefix, out):
        y = node("MatMul", [x, init(prefix + ".weight_t", w[prefix + ".weight"].T)], [out + "_mm"])
        return node("Add", [y, init(prefix + ".bias", w[prefix + ".bias"])], [out])

    def layer_norm(x, prefix, out):
        return node("LayerNormalization", [x, init(prefix + ".weight", w[prefix + ".weight"]),
                                           init(prefix + ".bias", w[prefix + ".bias"])],
                    [out], axis=-1, epsilon=c.eps)

    inputs, outputs = dm.io_names(c.layers)
    tok = node("Gather", [init("embed.weight", w["embed.weight"]), "input_ids"], ["tok"])
    pos = node("Gather", [init("positions.weight", w["positions.weight"]), "position_ids"], ["pos"])
    x = node("Add", [tok, pos], ["x0"])
    maskf = node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT)
    masked = node("Sub", [init("one", np.array(1.0, np.float32)), maskf], ["masked"])
    bias2 = node("Mul", [masked, init("neg", np.array(dm.NEG, np.float32))], ["bias2"])
    bias3 = node("Unsqueeze", [bias2, init("axes_1_2", np.array([1, 2], np.int64))], ["bias3"])
    # [batch, 1, seq, total_seq]: ONNX Runtime wants the mask's query dimension spelled out.
    batch = node("Shape", ["input_ids"], ["batch_dim"], start=0, end=1)
    seq = node("Shape", ["input_ids"], ["seq_dim"], start=1, end=2)
    total = node("Shape", ["attention_mask"], ["total_dim"], start=1, end=2)
    shape = node("Concat", [batch, init("one_dim", np.array([1], np.int64)), seq, total],
                 ["bias_shape"], axis=0)
    bias = node("Expand", [bias3, shape], ["bias"])
    split = init("qkv_split", np.array([c.d, c.d, c.d], np.int64))
    for i in range(c.layers):
        p = f"blocks.{i}"
        h = layer_norm(x, p + ".ln_1", f"l{i}_ln1")
        qkv = linear(h, p + ".qkv", f"l{i}_qkv")
        q, k, v = node("Split", [qkv, split], [f"l{i}_q", f"l{i}_k", f"l{i}_v"], axis=2)
        y = node("Attention", [q, k, v, bias, inputs[3 + 2 * i], inputs[4 + 2 * i]],
                 [f"l{i}_attn", outputs[1 + 2 * i], outputs[2 + 2 * i]],
                 q_num_heads=c.heads, kv_num_heads=c.kv_heads, is_causal=1)[0]
        x = node("Add", [x, linear(y, p + ".proj", f"l{i}_proj")], [f"l{i}_x1"])
        h = layer_norm(x, p + ".ln_2", f"l{i}_ln2")
        g = node("Gelu", [linear(h, p + ".fc", f"l{i}_fc")], [f"l{i}_gelu"], approximate="tanh")
        x = node("Add", [x, linear(g, p + ".out", f"l{i}_out")], [f"l{i}_x2"])
    h = layer_norm(x, "norm", "final_ln")
    node("MatMul", [h, init("head.weight_t", w["head.weight"].T)], ["logits"])

    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    kv_in = ["batch", c.kv_heads, "past_seq", c.head_dim]
    kv_out = ["batch", c.kv_heads, "total_seq", c.head_dim]
    graph_inputs = [helper.make_tensor_value_info("input_ids", i64, ["batch", "seq"]),
                    helper.make_tensor_value_info("attention_mask", i64, ["batch", "total_seq"]),
                    helper.make_tensor_value_info("position_ids", i64, ["batch", "seq"])]
    graph_inputs += [helper.make_tensor_value_info(n, f32, kv_in) for n in inputs[3:]]
    graph_outputs = [helper.make_tensor_value_info("logits", f32, ["batch", "seq", c.vocab])]
    graph_outputs += [helper.make_tensor_value_info(n, f32, kv_out) for n in outputs[1:]]
    graph = helper.make_graph(nodes, "gpt2_attention23", graph_inputs, graph_outputs, inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)],
                              producer_name="lumen export_decoders.py")
    proto.ir_version = 10
    return proto


def prompt_for(c, rng, length):
    return rng.integers(0, c.vocab, size=(1, length), dtype=np.int64)


def make_references(model, seed=0):
    """Prompts and PyTorch's greedy continuations, drawn until every reference step has a gap of
    at least MIN_GAP between its best and second-best logit. Returns a dict of arrays and info."""
    c = model.c
    for attempt in range(50):
        rng = np.random.default_rng(seed + attempt)
        prompt = prompt_for(c, rng, 12)
        a, b = prompt_for(c, rng, 13), prompt_for(c, rng, 9)
        prompt2 = np.zeros((2, 13), np.int64)
        mask2 = np.zeros((2, 13), np.int64)
        prompt2[0], mask2[0] = a[0], 1
        prompt2[1, 4:], mask2[1, 4:] = b[0], 1
        greedy1, gap1, _, _ = dm.greedy(model, prompt, np.ones_like(prompt), NEW_TOKENS)
        if gap1 < MIN_GAP:
            continue
        greedy2, gap2, _, _ = dm.greedy(model, prompt2, mask2, NEW_TOKENS)
        if min(gap1, gap2) >= MIN_GAP:
            break
    else:
        raise RuntimeError(f"no prompt with every greedy gap >= {MIN_GAP} in 50 seeds")
    info = {"prompt_seed": seed + attempt, "min_gap": min(gap1, gap2),
            "distinct_tokens": [int(len(set(greedy1[0]))), int(len(set(greedy2[0]))),
                                int(len(set(greedy2[1])))]}
    arrays = {"prompt": prompt, "greedy": greedy1, "prompt2": prompt2, "mask2": mask2,
              "greedy2": greedy2}
    return arrays, info


def export(name, outdir, force=False, log=lambda s: print(s, flush=True)):
    """Exports model `name` (see the module doc) with its references into outdir; returns the
    path of the .onnx file. Skips a model whose files exist unless force."""
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, name + ".onnx")
    files = [path] + [os.path.join(outdir, f"{name}.{k}.npy")
                      for k in ("prompt", "greedy", "prompt2", "mask2", "greedy2")]
    if not force and all(os.path.exists(f) for f in files):
        log(f"{name}: exists, skipped")
        return path
    t0 = time.perf_counter()
    model = dm.build(base_config(name))
    if "attention23" in name:
        save_model(attention23_graph(model), path)
    else:
        export_torch(model, path)
    t1 = time.perf_counter()
    base = os.path.join(outdir, base_config(name))
    if name != base_config(name) and os.path.exists(base + ".json"):
        # the same weights as the PyTorch-exported file beside it: the same references
        with open(base + ".json") as f:
            info = {k: v for k, v in json.load(f).items() if k in ("prompt_seed", "min_gap",
                                                                   "distinct_tokens")}
        arrays = {k: np.load(f"{base}.{k}.npy") for k in ("prompt", "greedy", "prompt2",
                                                          "mask2", "greedy2")}
    else:
        arrays, info = make_references(model)
    for key, array in arrays.items():
        np.save(os.path.join(outdir, f"{name}.{key}.npy"), array)
    c = model.c
    info.update(config=c.__dict__, parameters=parameter_count(model), opset=23 if
                "attention23" in name else OPSET)
    with open(os.path.join(outdir, name + ".json"), "w") as f:
        json.dump(info, f, indent=1)
    log(f"{name}: {info['parameters'] / 1e6:.1f} M parameters, exported in {t1 - t0:.1f} s, "
        f"references in {time.perf_counter() - t1:.1f} s (prompt seed {info['prompt_seed']}, "
        f"min gap {info['min_gap']:.4f}, distinct tokens {info['distinct_tokens']})")
    return path


def ort_available():
    """"python" when onnxruntime imports, "node" when bench/ort/node_modules exists, else None."""
    try:
        import onnxruntime  # noqa: F401
        return "python"
    except ImportError:
        pass
    if os.path.isdir(os.path.join(ROOT, "bench", "ort", "node_modules")) and shutil.which("node"):
        return "node"
    return None


def ort_greedy_node(path, ids, mask, new_tokens, threads, dump_dir=None):
    """Greedy generation in onnxruntime-node (bench/ort/generate.js). Returns (tokens, report)."""
    with tempfile.TemporaryDirectory() as tmp:
        np.save(os.path.join(tmp, "ids.npy"), ids)
        np.save(os.path.join(tmp, "mask.npy"), mask)
        out = os.path.join(tmp, "out.npy")
        cmd = ["node", os.path.join(ROOT, "bench", "ort", "generate.js"), path,
               "--ids", os.path.join(tmp, "ids.npy"), "--mask", os.path.join(tmp, "mask.npy"),
               "--max-new-tokens", str(new_tokens), "--threads", str(threads), "--out", out]
        if dump_dir:
            cmd += ["--dump-logits", dump_dir]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"generate.js failed: {run.stderr.strip()}")
        return np.load(out), json.loads(run.stdout.strip().splitlines()[-1])


def ort_greedy_python(path, ids, mask, new_tokens, threads, dump_dir=None):
    """The same loop with Python's onnxruntime (see bench/generate.py's OrtGenerator)."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import generate as bench_generate
    gen = bench_generate.OrtGenerator(path, threads)
    tokens, report = gen.greedy(ids, mask, new_tokens, dump_dir=dump_dir)
    return tokens, report


def check(name, outdir, threads=2, log=lambda s: print(s, flush=True)):
    """Checks NAME.onnx in ONNX Runtime against PyTorch: prompt logits (real positions) and the
    first decode step's logits of the padded batch 2, and both greedy continuations. Returns True
    when all agree."""
    kind = ort_available()
    if kind is None:
        log(f"{name}: no ONNX Runtime (npm install --ignore-scripts in bench/ort), not checked")
        return False
    run = ort_greedy_python if kind == "python" else ort_greedy_node
    path = os.path.join(outdir, name + ".onnx")
    ref = {k: np.load(os.path.join(outdir, f"{name}.{k}.npy"))
           for k in ("prompt", "greedy", "prompt2", "mask2", "greedy2")}
    model = dm.build(base_config(name))
    _, _, prompt_logits, step_logits = dm.greedy(model, ref["prompt2"], ref["mask2"], 2)
    with tempfile.TemporaryDirectory() as tmp:
        tokens2, _ = run(path, ref["prompt2"], ref["mask2"], NEW_TOKENS, threads, dump_dir=tmp)
        got_prompt = np.load(os.path.join(tmp, "prefill_logits.npy"))
        got_step = np.load(os.path.join(tmp, "step1_logits.npy"))[:, -1]
    real = ref["mask2"] != 0
    d_prompt = np.abs(got_prompt[real] - prompt_logits[real]).max()
    d_step = np.abs(got_step - step_logits).max()
    scale = np.abs(prompt_logits[real]).max()
    tokens1, _ = run(path, ref["prompt"], np.ones_like(ref["prompt"]), NEW_TOKENS, threads)
    same1 = np.array_equal(tokens1, ref["greedy"])
    same2 = np.array_equal(tokens2, ref["greedy2"])
    ok = d_prompt <= 1e-4 * scale and d_step <= 1e-4 * scale and same1 and same2
    log(f"{name}: ORT ({kind}) vs PyTorch: prompt logits max|diff| {d_prompt:.2e}, decode step "
        f"{d_step:.2e} (max|logit| {scale:.2f}); greedy {NEW_TOKENS} tokens batch 1 "
        f"{'identical' if same1 else 'DIFFERENT'}, padded batch 2 "
        f"{'identical' if same2 else 'DIFFERENT'} -> {'ok' if ok else 'FAIL'}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--models", default=",".join(BASE_MODELS))
    ap.add_argument("--tiny", action="store_true", help="the tiny configs (NAME-tiny)")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--check", action="store_true", help="check each file in ONNX Runtime")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    if args.tiny:
        names = [n if n.endswith("-tiny") else n + "-tiny" for n in names]
    for n in names:
        if base_config(n) not in dm.CONFIGS:
            ap.error(f"unknown model {n} (known: {', '.join(BASE_MODELS)}, each also -tiny)")
    failed = []
    for n in names:
        export(n, args.outdir, args.force)
        if args.check and not check(n, args.outdir, args.threads):
            failed.append(n)
    if failed:
        print(f"FAILED: {', '.join(failed)}")
        sys.exit(1)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Generation benchmark: prefill and decode tokens per second of the decoders of
tests/models/export_decoders.py on Lumen, ONNX Runtime and PyTorch, and Lumen's greedy tokens
against PyTorch's.

    bench/generate.py [--dir build/decoders] [--models gpt2,llama[,LABEL=FILE.onnx]] [--batches 1,8]
                      [--prompt 128] [--new 128] [--threads 2] [--repeat 1]
                      [--runtimes lumen,ort,torch,torch-cuda,torch-cuda-graph] [--doc [--label L]]
                      [--lumen-cli BUILD/lumen [--lumen-devices cpu,cuda]]

Per model and batch every runtime generates --new tokens greedily after the same random prompt of
--prompt tokens (no padding; end of sequence off). "prefill" is the prompt's run and the first
token's choice (batch x prompt tokens over its time), "decode" every later step (batch x (new - 1)
tokens over their time). Each runtime first runs an untimed generation at the same batch and
prompt: 2 tokens for PyTorch and ONNX Runtime (a growing cache: nothing depends on the length),
the full --new tokens for Lumen (its static cache's size picks the plans it compiles there). With
--repeat N the runtimes take turns N times and each rate is the median.

Runtimes: `lumen` (lumen.load_onnx(path).compile(device).generate(); on the CPU, and on CUDA when
the build has it; each measurement in a fresh process, whose peak resident memory is noted;
with --lumen-cli, `lumen generate --warmup` in a process per generation, for a machine whose
Python cannot import the build's module), `ort` (the same file in ONNX Runtime's CPU provider:
Python onnxruntime with an I/O binding that feeds each step's present outputs back as its past,
where it imports, else onnxruntime-node through bench/ort/generate.js; a growing cache, as
Optimum's generation), `torch` (PyTorch eager on the CPU, a growing cache:
tests/models/decoder_models.greedy), and on a machine with CUDA `torch-cuda` (the same on the
GPU) and `torch-cuda-graph` (a static cache whose decode step is captured once as a
torch.cuda.CUDAGraph and replayed: decoder_models.StaticCacheDecoder). Every CPU runtime gets
--threads threads. Lumen's ratio is over each peer on the same kind of device (Lumen CPU over CPU
peers, Lumen CUDA over CUDA peers).

A --models entry LABEL=FILE.onnx is another file of one of these decoders (e.g. with int4
weights from tests/models/quantize_nbits.py): it runs on Lumen and ONNX Runtime only, unchecked.

Check: Lumen's greedy continuation of the reference prompts (NAME.prompt.npy, batch 1, and the
left-padded NAME.prompt2.npy, batch 2) against PyTorch's (NAME.greedy*.npy, 64 tokens, fp32) on
every Lumen device. Models missing from --dir are exported there first (the llama file takes a
few minutes). --doc writes the table to docs/benchmarks.md under "## generate" (section
generate[-LABEL]).
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

from bench_doc import ROOT, write_section

sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
warnings.filterwarnings("ignore")

GENERATE_JS = os.path.join(ROOT, "bench", "ort", "generate.js")
LABELS = {"lumen": "Lumen CPU", "lumen-cuda": "Lumen CUDA", "ort": "ONNX Runtime CPU",
          "torch": "PyTorch eager CPU", "torch-cuda": "PyTorch eager CUDA",
          "torch-cuda-graph": "PyTorch static cache + CUDA graph"}


def import_lumen():
    """The lumen module when it imports and has the generation API, else None."""
    try:
        import lumen
    except ImportError:
        return None
    return lumen if hasattr(lumen.Model, "generate") else None


class OrtGenerator:
    """Greedy generation in Python's onnxruntime (CPU provider) with a growing cache: each step's
    present outputs stay ONNX Runtime values and are bound as the next step's past (no copies)."""

    def __init__(self, path, threads):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.ort = ort
        self.session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        self.past = [i for i in self.session.get_inputs() if i.name.startswith("past_key_values.")]
        self.outputs = [o.name for o in self.session.get_outputs()]

    def _run(self, ids, mask, pos, past):
        binding = self.session.io_binding()
        binding.bind_cpu_input("input_ids", np.ascontiguousarray(ids))
        binding.bind_cpu_input("attention_mask", np.ascontiguousarray(mask))
        binding.bind_cpu_input("position_ids", np.ascontiguousarray(pos))
        for meta in self.past:
            value = past[meta.name]
            if isinstance(value, np.ndarray):
                binding.bind_cpu_input(meta.name, value)
            else:
                binding.bind_ortvalue_input(meta.name, value)
        for name in self.outputs:
            binding.bind_output(name, "cpu")
        self.session.run_with_iobinding(binding)
        values = dict(zip(self.outputs, binding.get_outputs()))
        return values["logits"].numpy(), {
            m.name: values[m.name.replace("past_key_values.", "present.")] for m in self.past}

    def greedy(self, ids, mask, new_tokens, dump_dir=None):
        """Returns (tokens int64 [batch, new_tokens], {"prefill_s", "decode_s"}); dump_dir gets
        prefill_logits.npy and step1_logits.npy as generate.js writes them."""
        batch = ids.shape[0]
        pos = np.where(mask != 0, np.cumsum(mask, 1) - 1, 1).astype(np.int64)
        past = {m.name: np.zeros((batch, m.shape[1], 0, m.shape[3]), np.float32)
                for m in self.past}
        t0 = time.perf_counter()
        logits, past = self._run(ids, mask, pos, past)
        token = logits[:, -1].argmax(-1)[:, None].astype(np.int64)
        t1 = time.perf_counter()
        if dump_dir:
            np.save(os.path.join(dump_dir, "prefill_logits.npy"), logits)
        tokens = [token]
        next_pos = pos[:, -1:] + 1
        for step in range(new_tokens - 1):
            mask = np.concatenate([mask, np.ones((batch, 1), np.int64)], 1)
            logits, past = self._run(token, mask, next_pos, past)
            token = logits[:, -1].argmax(-1)[:, None].astype(np.int64)
            tokens.append(token)
            next_pos = next_pos + 1
            if dump_dir and step == 0:
                np.save(os.path.join(dump_dir, "step1_logits.npy"), logits)
        return np.concatenate(tokens, 1), {"prefill_s": t1 - t0,
                                           "decode_s": time.perf_counter() - t1}


def ort_kind():
    try:
        import onnxruntime  # noqa: F401
        return "python"
    except ImportError:
        return "node" if os.path.isdir(os.path.join(ROOT, "bench", "ort", "node_modules")) else None


def run_ort(path, prompt, new_tokens, threads, kind):
    """ONNX Runtime's timed generation (after a 2-token warm-up); returns (prefill_s, decode_s)."""
    mask = np.ones_like(prompt)
    if kind == "python":
        gen = OrtGenerator(path, threads)
        gen.greedy(prompt, mask, 2)
        _, t = gen.greedy(prompt, mask, new_tokens)
        return t["prefill_s"], t["decode_s"]
    with tempfile.TemporaryDirectory() as tmp:
        ids = os.path.join(tmp, "ids.npy")
        np.save(ids, prompt)
        out = subprocess.run(["node", GENERATE_JS, path, "--ids", ids, "--max-new-tokens",
                              str(new_tokens), "--threads", str(threads), "--warmup", "2"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(out.stderr.strip()[-500:])
        report = json.loads(out.stdout.strip().splitlines()[-1])
        return report["prefill_s"], report["decode_s"]


class TorchRunner:
    """PyTorch's three forms on one decoder (weights as export_decoders builds them)."""

    def __init__(self, name):
        import decoder_models as dm
        import export_decoders as ed
        self.dm = dm
        self.model = dm.build(ed.base_config(name))
        self.cuda_model = None

    def eager(self, prompt, new_tokens, device):
        model = self.model
        if device == "cuda":
            if self.cuda_model is None:
                import copy
                self.cuda_model = copy.deepcopy(self.model).cuda()
            model = self.cuda_model
        mask = np.ones_like(prompt)
        self.dm.greedy(model, prompt, mask, 2, device=device)
        t = {}
        self.dm.greedy(model, prompt, mask, new_tokens, device=device, timings=t)
        return t["prefill_s"], t["decode_s"]

    def cuda_graph(self, prompt, new_tokens):
        import torch
        if self.cuda_model is None:
            import copy
            self.cuda_model = copy.deepcopy(self.model).cuda()
        batch, length = prompt.shape
        gen = self.dm.StaticCacheDecoder(self.cuda_model, batch, length + new_tokens, "cuda",
                                         cuda_graph=True)
        mask = np.ones_like(prompt)
        gen.prefill(prompt, mask)
        gen.decode()  # captures the graph
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        gen.prefill(prompt, mask)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        for _ in range(new_tokens - 1):
            gen.decode()
        torch.cuda.synchronize()
        return t1 - t0, time.perf_counter() - t1


class LumenRunner:
    """Lumen's generate() on one device, each measurement and check in a process of its own
    (bench/generate.py --worker JOB): plans and their memory stay with the sizes that made them,
    so one process measuring every size of the 0.5 B model would hold them all at once."""

    def __init__(self, path, device, threads):
        self.job = {"path": path, "device": device, "threads": threads}

    def _worker(self, **job):
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker",
                              json.dumps(dict(self.job, **job))], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"exit {out.returncode}: {out.stderr.strip()[-500:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])

    def run(self, prompt, new_tokens):
        """(prefill_s, decode_s, peak resident MB) of one timed generation after an untimed one
        of the same sizes (which compiles their plans)."""
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "prompt.npy")
            np.save(path, prompt)
            r = self._worker(kind="run", prompt=path, new=new_tokens)
        return r["prefill_s"], r["decode_s"], r["peak_rss_mb"]

    def check(self, model_dir, name):
        """Greedy tokens of the reference prompts against PyTorch's: "identical" or where they
        first differ."""
        return self._worker(kind="check", dir=model_dir, name=name)["result"]


def worker(job):
    """One LumenRunner job in this process; returns its JSON-able result."""
    import resource
    lumen = import_lumen()
    lumen.set_num_threads(job["threads"])
    model = lumen.load_onnx(job["path"]).compile(job["device"])
    if job["kind"] == "run":
        prompt = np.load(job["prompt"])
        model.generate(prompt, max_new_tokens=job["new"])
        out = np.asarray(model.generate(prompt, max_new_tokens=job["new"]))
        assert out.shape == (prompt.shape[0], job["new"]), out.shape
        stats = model.generation_stats
        return {"prefill_s": stats["prefill_s"], "decode_s": stats["decode_s"],
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    return {"result": check_greedy(
        job["dir"], job["name"],
        lambda prompt, mask, new: model.generate(prompt, max_new_tokens=new, attention_mask=mask))}


def check_greedy(model_dir, name, generate):
    """Lumen's greedy tokens of the reference prompts (batch 1, and batch 2 left-padded) against
    PyTorch's: "identical" or where they first differ. generate(prompt, mask, new_tokens) returns
    the new ids [batch, new_tokens]; mask's zeros mark the left padding."""
    results = []
    for prompt_key, mask_key, ref_key in (("prompt", None, "greedy"),
                                           ("prompt2", "mask2", "greedy2")):
        prefix = os.path.join(model_dir, name)
        prompt, ref = np.load(f"{prefix}.{prompt_key}.npy"), np.load(f"{prefix}.{ref_key}.npy")
        mask = np.load(f"{prefix}.{mask_key}.npy") if mask_key else np.ones_like(prompt)
        got = np.asarray(generate(prompt, mask, ref.shape[1]))
        batch = ref.shape[0]
        if got.shape == ref.shape and np.array_equal(got, ref):
            results.append(f"batch {batch} identical")
        else:
            bad = np.argwhere(got != ref) if got.shape == ref.shape else [[-1, -1]]
            results.append(f"batch {batch} DIFFERS (first at row {bad[0][0]}, token "
                           f"{bad[0][1]})")
    return f"{ref.shape[1]} tokens: " + ", ".join(results)


class LumenCliRunner:
    """The same through the `lumen generate` command line (where the lumen module does not import,
    e.g. a Python other than the build's): one process per generation, warmed up by --warmup."""

    def __init__(self, exe, path, device, threads):
        self.cmd = [exe, "generate", path, "--device", device, "--threads", str(threads)]

    def _generate(self, prompts, new_tokens, warmup):
        cmd = self.cmd + ["--max-new-tokens", str(new_tokens)] + (["--warmup"] if warmup else [])
        for row in prompts:
            cmd += ["--ids", ",".join(str(int(t)) for t in row)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError((out.stdout + out.stderr).strip()[-500:])
        ids = [[int(t) for t in m.group(1).split(",")]
               for m in re.finditer(r"^new ids(?: \[\d+\])?: ([\d,]+)$", out.stdout, re.M)]
        prefill = float(re.search(r"^prefill: .* in ([\d.]+) ms", out.stdout, re.M).group(1))
        decode = float(re.search(r"^decode: .* in ([\d.]+) ms", out.stdout, re.M).group(1))
        return ids, prefill / 1e3, decode / 1e3

    def run(self, prompt, new_tokens):
        ids, prefill_s, decode_s = self._generate(prompt, new_tokens, True)
        assert np.asarray(ids).shape == (prompt.shape[0], new_tokens), np.asarray(ids).shape
        return prefill_s, decode_s

    def check(self, model_dir, name):
        def generate(prompt, mask, new_tokens):
            rows = [[t for t, m in zip(row, mrow) if m] for row, mrow in zip(prompt, mask)]
            return self._generate(rows, new_tokens, False)[0]
        return check_greedy(model_dir, name, generate)


def logits_vocab(path):
    """The vocabulary size: the last dimension of the file's logits output."""
    import onnx
    graph = onnx.load(path, load_external_data=False).graph
    logits = next(o for o in graph.output if o.name == "logits")
    return logits.type.tensor_type.shape.dim[2].dim_value


def rate(tokens, seconds):
    return tokens / seconds if seconds > 0 else float("nan")


def cpu_name():
    try:
        text = open("/proc/cpuinfo").read()
        m = re.search(r"^model name\s*:\s*(.*)$", text, re.M)
        return m.group(1).strip() if m else platform.processor()
    except OSError:
        return platform.processor() or "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=os.path.join(ROOT, "build", "decoders"))
    ap.add_argument("--models", default="gpt2,llama")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--runtimes", default="lumen,ort,torch,torch-cuda,torch-cuda-graph")
    ap.add_argument("--doc", action="store_true")
    ap.add_argument("--label", default="")
    ap.add_argument("--lumen-cli", help="run Lumen through this `lumen` executable (lumen "
                    "generate) instead of the Python module")
    ap.add_argument("--lumen-devices", default="cpu,cuda",
                    help="with --lumen-cli: the devices to run Lumen on")
    ap.add_argument("--worker", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return

    import torch
    import export_decoders as ed
    torch.set_num_threads(args.threads)
    lumen = import_lumen()
    wanted = args.runtimes.split(",")
    cuda = torch.cuda.is_available()
    notes = []
    runtimes = []
    if "lumen" in wanted and args.lumen_cli:
        runtimes += [{"cpu": "lumen", "cuda": "lumen-cuda"}[d]
                     for d in args.lumen_devices.split(",")]
    elif "lumen" in wanted:
        if lumen is None:
            notes.append("Lumen: not measured (no lumen module with Model.generate on "
                         "PYTHONPATH)")
        else:
            runtimes.append("lumen")
            if "cuda" in lumen.backends():
                runtimes.append("lumen-cuda")
    kind = ort_kind()
    if "ort" in wanted:
        if kind:
            runtimes.append("ort")
        else:
            notes.append("ONNX Runtime: not measured (no onnxruntime module, no bench/ort/"
                         "node_modules)")
    if "torch" in wanted:
        runtimes.append("torch")
    for rt in ("torch-cuda", "torch-cuda-graph"):
        if rt in wanted and cuda:
            runtimes.append(rt)

    rows, checks = [], []
    for entry in args.models.split(","):
        name, _, other = entry.partition("=")
        if other:  # another file of a decoder (e.g. int4 weights): Lumen and ONNX Runtime only
            path, vocab = other, logits_vocab(other)
            runners = {}
            model_runtimes = [rt for rt in runtimes if rt.startswith("lumen") or rt == "ort"]
        else:
            path = ed.export(name, args.dir, log=lambda s: print(s, flush=True))
            vocab = ed.dm.CONFIGS[ed.base_config(name)].vocab
            runners = {"torch": TorchRunner(name)}
            model_runtimes = runtimes
        for rt, device in (("lumen", "cpu"), ("lumen-cuda", "cuda")):
            if rt in model_runtimes:
                runners[rt] = (LumenCliRunner(args.lumen_cli, path, device, args.threads)
                               if args.lumen_cli else LumenRunner(path, device, args.threads))
                if not other:
                    check = runners[rt].check(args.dir, name)
                    checks.append(f"{name}, {LABELS[rt]}: greedy vs PyTorch, {check}")
                    print(checks[-1], flush=True)
        for batch in [int(b) for b in args.batches.split(",")]:
            prompt = np.random.default_rng(batch).integers(0, vocab, (batch, args.prompt),
                                                           dtype=np.int64)
            times = {rt: [] for rt in model_runtimes}
            for _ in range(args.repeat):
                for rt in model_runtimes:
                    try:
                        if rt.startswith("lumen"):
                            t = runners[rt].run(prompt, args.new)
                        elif rt == "ort":
                            t = run_ort(path, prompt, args.new, args.threads, kind)
                        elif rt == "torch-cuda-graph":
                            t = runners["torch"].cuda_graph(prompt, args.new)
                        else:
                            t = runners["torch"].eager(prompt, args.new,
                                                       "cuda" if rt == "torch-cuda" else "cpu")
                    except Exception as e:  # a failing runtime is reported, the rest go on
                        notes.append(f"{name} batch {batch} {LABELS[rt]}: failed: "
                                     f"{type(e).__name__}: {str(e)[:300]}")
                        print(notes[-1], flush=True)
                        continue
                    if rt.startswith("lumen") and len(t) > 2:  # the module's worker measures it
                        notes.append(f"{name} batch {batch} {LABELS[rt]}: peak resident memory "
                                     f"{t[2]:.0f} MB (its process)")
                    times[rt].append(t[:2])
            for rt in model_runtimes:
                if not times[rt]:
                    continue
                prefill_s = statistics.median(t[0] for t in times[rt])
                decode_s = statistics.median(t[1] for t in times[rt])
                rows.append({"model": name, "batch": batch, "runtime": rt,
                             "prefill": rate(batch * args.prompt, prefill_s),
                             "decode": rate(batch * (args.new - 1), decode_s)})
                r = rows[-1]
                print(f"{name} batch {batch} {LABELS[rt]}: prefill {r['prefill']:.1f} tok/s, "
                      f"decode {r['decode']:.1f} tok/s", flush=True)

    lines = table(rows, args, cuda, kind, notes, checks)
    print("\n".join(lines))
    if args.doc:
        write_section("generate" + (f"-{args.label}" if args.label else ""), "\n".join(lines))
        print("wrote docs/benchmarks.md")


def table(rows, args, cuda, kind, notes, checks):
    import torch
    by_key = {(r["model"], r["batch"], r["runtime"]): r for r in rows}
    machine = f"{cpu_name()}, {args.threads} threads"
    if cuda:
        machine += f"; {torch.cuda.get_device_name(0)}"
    ort_text = {"python": "onnxruntime (Python)", "node": "onnxruntime-node 1.30"}.get(kind, "-")
    lines = [
        f"## generate: prefill {args.prompt} tokens, decode {args.new} tokens, greedy ({machine})",
        "",
        f"`bench/generate.py --models {args.models} --batches {args.batches} --prompt "
        f"{args.prompt} --new {args.new} --threads {args.threads} --repeat {args.repeat}"
        f" --runtimes {args.runtimes}"
        + (f" --lumen-devices {args.lumen_devices}" if args.lumen_cli else "") + "`; "
        f"PyTorch {torch.__version__}, ONNX Runtime: {ort_text}. Tokens per second counting "
        "every sequence of the batch; prefill = the prompt's run and the first token's choice, "
        f"decode = the {args.new - 1} later steps. Lumen/peer: Lumen's rate over the peer's on "
        "the same kind of device (above 1: Lumen is faster).",
        "",
        "| model | batch | runtime | prefill tok/s | decode tok/s | Lumen/peer prefill | "
        "Lumen/peer decode |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        own = "lumen-cuda" if "cuda" in r["runtime"] else "lumen"
        ref = by_key.get((r["model"], r["batch"], own))
        if ref is None or r["runtime"].startswith("lumen"):
            ratios = "- | -"
        else:
            ratios = f"{ref['prefill'] / r['prefill']:.2f} | {ref['decode'] / r['decode']:.2f}"
        lines.append(f"| {r['model']} | {r['batch']} | {LABELS[r['runtime']]} | "
                     f"{r['prefill']:.1f} | {r['decode']:.1f} | {ratios} |")
    lines.append("")
    lines += [f"- {c}" for c in checks] + [f"- {n}" for n in notes]
    return lines


if __name__ == "__main__":
    main()

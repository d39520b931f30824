"""Attention on the GPU at 16 bits: Lumen's FusedAttention kernel next to PyTorch's
scaled_dot_product_attention, each backend of it forced in turn (flash, cuDNN, memory-efficient),
on the same shapes, operands already on the GPU, timed the same way (CUDA events around
back-to-back calls, the median of 7 rounds of about 20 ms, after a warm-up).

    python3 bench/attention.py --lumen-bench BUNDLE/bin/lumen_attention_bench [--mask] [--doc]

--doc writes the table into docs/benchmarks.md (section `attention`, or `attention-masked`)."""
import argparse
import json
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, __import__("os").path.dirname(__file__))
from bench_doc import write_section  # noqa: E402

# BERT-base's heads (12 of 64) at long sequences, batch 1 and 8; then heads of 128.
DEFAULT_SHAPES = ["1,12,1024,64", "1,12,2048,64", "1,12,4096,64",
                  "8,12,1024,64", "8,12,2048,64", "8,12,4096,64",
                  "1,16,2048,128", "8,16,2048,128"]
BACKENDS = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
            ("efficient", SDPBackend.EFFICIENT_ATTENTION)]


def time_calls(fn):
    """Milliseconds per call: the median of 7 rounds of back-to-back calls (about 20 ms each)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    reps = max(5, int(20.0 / max(start.elapsed_time(stop), 1e-3)))
    rounds = []
    for _ in range(7):
        start.record()
        for _ in range(reps):
            fn()
        stop.record()
        stop.synchronize()
        rounds.append(start.elapsed_time(stop) / reps)
    return sorted(rounds)[len(rounds) // 2]


def torch_times(shape, dtype, masked):
    b, h, s, d = shape
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.rand(b, h, s, d, device="cuda", dtype=dtype, generator=gen) * 2 - 1
               for _ in range(3))
    mask = None
    if masked:  # the key-padding mask lumen_attention_bench --mask uses
        mask = torch.zeros(b, 1, 1, s, device="cuda", dtype=dtype)
        mask[..., s - s // 8:] = float("-inf")
    out = {}
    for name, backend in BACKENDS:
        try:
            with sdpa_kernel(backend):
                out[name] = time_calls(
                    lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
        except RuntimeError as e:  # the backend does not take this shape or device
            print(f"  {name}: {str(e).splitlines()[0][:100]}", file=sys.stderr)
            out[name] = None
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lumen-bench", required=True, help="the lumen_attention_bench program")
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    ap.add_argument("--shapes", default=" ".join(DEFAULT_SHAPES), help="B,H,S,D ...")
    ap.add_argument("--mask", action="store_true",
                    help="an additive key-padding mask [B, 1, 1, S] (SDPA's flash backend takes none)")
    ap.add_argument("--doc", action="store_true", help="write docs/benchmarks.md's section")
    args = ap.parse_args()
    shapes = args.shapes.split()
    dtype = getattr(torch, args.dtype)
    lumen = {}
    run = subprocess.run([args.lumen_bench, args.dtype] + (["--mask"] if args.mask else []) + shapes,
                         capture_output=True, text=True, check=True)
    for line in run.stdout.splitlines():
        r = json.loads(line)
        lumen[(r["batch"], r["heads"], r["seq"], r["depth"])] = r
    gpu = torch.cuda.get_device_name()
    rows = []
    for text in shapes:
        shape = tuple(int(x) for x in text.split(","))
        t = torch_times(shape, dtype, args.mask)
        r = lumen[shape]
        b, h, s, d = shape
        flop = 4.0 * b * h * s * s * d
        best = min((x for x in t.values() if x is not None), default=None)

        def ms(x):
            return "-" if x is None else f"{x:.4f}"

        def tf(x):
            return "-" if x is None else f"{flop / (x * 1e-3) / 1e12:.0f}"
        flash, mine = t["flash"], r["ms"]
        vs_flash = "-" if flash is None else f"{mine / flash:.2f}"
        rows.append(f"| {b} | {h} | {s} | {d} | {mine:.4f} | {tf(mine)} | {ms(flash)} | "
                    f"{tf(flash)} | {ms(t['cudnn'])} | {ms(t['efficient'])} | {vs_flash} | "
                    f"{'-' if best is None else f'{mine / best:.2f}'} |")
        print(rows[-1], flush=True)
    mask_text = ("an additive key-padding mask [B, 1, 1, S] hiding each sequence's last eighth "
                 "(`--mask`; SDPA's flash backend takes no mask, so its columns are empty)"
                 if args.mask else "no mask")
    head = (f"## attention: Lumen's FusedAttention kernel vs PyTorch {torch.__version__} "
            f"scaled_dot_product_attention ({gpu}, {args.dtype})\n\n"
            f"`python3 bench/attention.py --lumen-bench BUNDLE/bin/lumen_attention_bench"
            f"{'' if args.dtype == 'float16' else ' --dtype ' + args.dtype}"
            f"{' --mask' if args.mask else ''}`: Q, K and V "
            f"[B, H, S, D] of random values already on the GPU, scale 1/sqrt(D), "
            f"{mask_text}; "
            f"milliseconds per call by CUDA events around back-to-back calls (median of 7 rounds "
            f"of about 20 ms). Lumen: the kernel a FusedAttention node runs "
            f"(`cuda::launch_attention`, the tensor-core kernel of "
            f"src/backends/cuda/flash_attention.cu). PyTorch: each SDPA backend forced by "
            f"`sdpa_kernel`. TFLOP/s count 4·B·H·S²·D. Lumen/flash below 1: Lumen is faster.\n\n"
            "| B | H | S | D | Lumen ms | Lumen TFLOP/s | SDPA flash ms | flash TFLOP/s | "
            "SDPA cuDNN ms | SDPA efficient ms | Lumen / flash | Lumen / best SDPA |\n"
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    text = head + "\n" + "\n".join(rows) + "\n"
    print(text)
    if args.doc:
        name = "attention" + ("" if args.dtype == "float16" else "-" + args.dtype)
        write_section(name + ("-masked" if args.mask else ""), text)


if __name__ == "__main__":
    main()

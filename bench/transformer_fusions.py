#!/usr/bin/python3
"""The transformer fusions (fuse-layer-norm, fuse-gelu, fuse-attention) on the zoo's transformer
models: `lumen run --repeat N` with the whole optimizer on, with it off (`--no-optimize`) and, when
--baseline names another build's `lumen` (one without these passes), that build's optimizer on;
interleaved round by round, median over the rounds of each run's median latency. The machine is
shared, so single runs move 10-15%: compare only the medians, and only within one run.

    bench/transformer_fusions.py [--zoo build/model_zoo] [--baseline OTHER/lumen]
                                 [--rounds 3] [--repeat 20] [--models a,b]
"""
import argparse
import os
import statistics

from bench_doc import ROOT
from optimizer import input_arg, latency, nodes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zoo", default=os.path.join(ROOT, "build", "model_zoo"))
    ap.add_argument("--lumen", default=os.path.join(ROOT, "build", "lumen"))
    ap.add_argument("--baseline", default="")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--models", default="bert_tiny,gpt_tiny,bert_base,gpt2_small,vit_b_16")
    args = ap.parse_args()
    print("model | nodes before | nodes after | off ms | baseline on ms | on ms | on / off")
    for name in [m for m in args.models.split(",") if m]:
        model = os.path.join(args.zoo, name + ".onnx")
        inp = input_arg(args.lumen, args.zoo, name)
        before, after = nodes(args.lumen, model)
        off, base, on = [], [], []
        for _ in range(args.rounds):
            off.append(latency(args.lumen, model, inp, args.repeat, False))
            if args.baseline:
                base.append(latency(args.baseline, model, inp, args.repeat, True))
            on.append(latency(args.lumen, model, inp, args.repeat, True))
        med_off, med_on = statistics.median(off), statistics.median(on)
        med_base = f"{statistics.median(base):.2f}" if base else "-"
        print(f"{name} | {before} | {after} | {med_off:.2f} | {med_base} | {med_on:.2f} | "
              f"{med_on / med_off:.2f}   (rounds off {off}, baseline {base}, on {on})",
              flush=True)


if __name__ == "__main__":
    main()

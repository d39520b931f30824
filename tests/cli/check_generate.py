#!/usr/bin/python3
"""`lumen generate` (issue 28) on the tiny GPT-2-like and Llama-like decoders of
tests/models/export_decoders.py, exported into a temporary folder: the greedy ids equal PyTorch's
references (one prompt, and a batch made with --batch), the rates are printed, seeded sampling
repeats itself, --eos stops, and bad arguments and inputs fail with a message instead of a crash.

    tests/cli/check_generate.py BUILD_DIR [--device cuda]   (on a GPU machine: that device too)
"""
import os
import re
import sys
import tempfile

import numpy as np

from check_cli import ROOT, lumen

sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
import export_decoders as ed  # noqa: E402


def ids_of(out):
    return [[int(t) for t in m.group(1).split(",")]
            for m in re.finditer(r"^new ids(?: \[\d+\])?: ([\d,]+)$", out, re.M)]


def check_model(build, folder, name, device):
    path = ed.export(name, folder, log=lambda _: None)
    prompt = np.load(path[:-5] + ".prompt.npy")[0].tolist()
    greedy = np.load(path[:-5] + ".greedy.npy")[0].tolist()
    ids = ",".join(map(str, prompt))
    out = lumen(build, "generate", path, "--ids", ids, "--max-new-tokens", "24", "--threads", "2",
                "--device", device)
    assert ids_of(out) == [greedy[:24]], (out, greedy[:24])
    assert re.search(r"^prefill: \d+ tokens x 1 in [\d.]+ ms \([\d.]+ tokens/s\)$", out, re.M), out
    assert re.search(r"^decode: 23 tokens x 1 in [\d.]+ ms \([\d.]+ tokens/s", out, re.M), out
    # The exporters' decoders write the cache in place; the opset-23 Attention form (its presents
    # made inside the op) copies the new slots in.
    how = "new slots copied in" if "attention23" in name else "written in place"
    assert f"cache: 64 slots per sequence (static, {how}); plans: 2" in out, out

    out = lumen(build, "generate", path, "--ids", ids, "--max-new-tokens", "8", "--batch", "3",
                "--device", device)
    assert ids_of(out) == [greedy[:8]] * 3, out

    sample = ["generate", path, "--device", device, "--ids", ids, "--max-new-tokens", "12",
              "--sample", "--top-k", "20", "--top-p", "0.9", "--temperature", "1.5"]
    a, b = lumen(build, *sample, "--seed", "7"), lumen(build, *sample, "--seed", "7")
    assert ids_of(a) == ids_of(b) and len(ids_of(a)[0]) == 12, (a, b)
    out = lumen(build, *sample[:-6], "--sample", "--top-k", "1", "--seed", "3")
    assert ids_of(out) == [greedy[:12]], out

    eos = greedy[3]
    out = lumen(build, "generate", path, "--ids", ids, "--max-new-tokens", "20", "--eos", str(eos),
                "--device", device)
    got = ids_of(out)[0]
    assert got == greedy[:greedy.index(eos) + 1], (got, greedy)
    return path, prompt


def check_bad(build, path, prompt):
    ids = ",".join(map(str, prompt))
    for args, message in [
        (["generate", path], "no prompt given"),
        (["generate", "--ids", ids], "no model given"),
        (["generate", path, "--ids", "1,x,3"], "'x' is not a token id"),
        (["generate", path, "--ids", ids, "--max-new-tokens", "0"], "--max-new-tokens"),
        (["generate", path, "--ids", "5,1000,2"], "input_ids[0][1] = 1000 is outside the vocabulary"),
        (["generate", path, "--ids", "5,-1,2"], "input_ids[0][1] = -1 is outside the vocabulary"),
        (["generate", path, "--ids", ids, "--sample", "--temperature", "0"], "temperature must be"),
        (["generate", path, "--ids", ids, "--top-p", "1.5"], "top_p must be in (0, 1]"),
        (["generate", path, "--ids", ids, "--max-length", "16", "--max-new-tokens", "10"],
         "exceed the maximum length 16"),
        (["generate", path, "--ids", ids, "--ids", ids, "--batch", "2"], "--batch repeats one"),
        (["generate", path, "--ids", ids, "--device", "metal"], "backend 'metal' is not available"),
        (["generate", os.path.join(ROOT, "models", "digits", "digits.onnx"), "--ids", "1"],
         "no input 'input_ids'"),
        (["generate", "/nonexistent.onnx", "--ids", "1"], "nonexistent.onnx"),
    ]:
        out = lumen(build, *args, ok=False)
        assert message in out, (args, message, out)


def main():
    build = sys.argv[1]
    devices = ["cpu"] + sys.argv[3:4] if sys.argv[2:3] == ["--device"] else ["cpu"]
    with tempfile.TemporaryDirectory() as folder:
        path, prompt = None, None
        for device in devices:
            for name in ("gpt2-tiny", "llama-tiny", "gpt2-attention23-tiny"):
                path_prompt = check_model(build, folder, name, device)
                if name == "gpt2-tiny":
                    path, prompt = path_prompt
                print(f"check_generate: {name} on {device} passed", flush=True)
        check_bad(build, path, prompt)
    print("check_generate: all passed")


if __name__ == "__main__":
    main()

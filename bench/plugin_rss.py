#!/usr/bin/python3
"""Resident memory of a CPU-only `lumen run` with the CUDA backend as a plugin: the plugin next to
liblumen (loaded only when a GPU backend is asked for), the plugin absent (what a CPU-only build
installs), and the CUDA libraries loaded at start-up as liblumen once linked them (LD_PRELOAD of
libcudart, libcublasLt and libcudnn: the same mapping a DT_NEEDED entry makes). Also `--device
cuda` with the plugin, where there is a GPU.

    bench/plugin_rss.py LUMEN LIBDIR MODEL [--rounds 5]

LIBDIR is the folder of liblumen.so.0 and liblumen_cuda.so.0. Prints a Markdown table (median peak
RSS of each configuration over the rounds, interleaved) and writes it to the "plugin-rss" section
of docs/benchmarks.md.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile

from bench_doc import write_section


def peak_rss_mb(cmd, env):
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out[-1500:]}")
    return usage.ru_maxrss / 1024.0


def find_lib(name):
    """The path the dynamic loader would map for `name` (ldconfig's cache or LD_LIBRARY_PATH)."""
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") + ["/usr/local/cuda/lib64"]:
        if d and os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.strip().startswith(name + " "):
            return line.split("=>")[-1].strip()
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lumen")
    ap.add_argument("libdir")
    ap.add_argument("model")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cuda", action="store_true", help="also run --device cuda")
    a = ap.parse_args()
    plugin = os.path.join(a.libdir, "liblumen_cuda.so.0")
    # A copy of the library folder without the plugin: the install of a CPU-only build.
    cpu_only = tempfile.mkdtemp(prefix="lumen_cpu_only_")
    for name in os.listdir(a.libdir):
        if name.startswith("lib") and ".so" in name and not name.startswith("liblumen_cuda"):
            src = os.path.join(a.libdir, name)
            if os.path.isfile(src):
                shutil.copy(src, cpu_only)
    base = dict(os.environ)
    run = [a.lumen, "run", a.model, "--repeat", "20"]
    cuda_libs = [find_lib(n) for n in ("libcudart.so.13", "libcublasLt.so.13", "libcudnn.so.9")]
    configs = {
        "plugin next to liblumen, --device cpu": (run + ["--device", "cpu"], a.libdir, None),
        "no plugin (a CPU-only build's install), --device cpu": (run + ["--device", "cpu"], cpu_only,
                                                                 None),
    }
    if all(cuda_libs):
        configs["CUDA libraries loaded at start-up (liblumen before the plugin), --device cpu"] = (
            run + ["--device", "cpu"], cpu_only, ":".join(cuda_libs))
    if a.cuda:
        configs["plugin next to liblumen, --device cuda"] = (run + ["--device", "cuda"], a.libdir,
                                                            None)
    rss = {k: [] for k in configs}
    for _ in range(a.rounds):
        for name, (cmd, libdir, preload) in configs.items():
            env = dict(base)
            env["LD_LIBRARY_PATH"] = libdir + ":" + base.get("LD_LIBRARY_PATH", "")
            if preload:
                env["LD_PRELOAD"] = preload
            rss[name].append(peak_rss_mb(cmd, env))
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip() if a.cuda else "no GPU"
    lines = ["## Resident memory of a CPU-only run with the CUDA plugin (`bench/plugin_rss.py`)\n",
             f"`lumen run {os.path.basename(a.model)} --repeat 20`; machine: {gpu}; the plugin "
             f"liblumen_cuda.so.0 is {os.path.getsize(plugin) / 1e6:.1f} MB. The third row is what "
             "every process paid while liblumen linked the CUDA libraries itself.\n",
             "| configuration | peak RSS, MB (median of %d) |" % a.rounds, "| --- | ---: |"]
    lines += [f"| {name} | {statistics.median(values):.1f} |" for name, values in rss.items()]
    write_section("plugin-rss", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

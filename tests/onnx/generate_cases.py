#!/usr/bin/python3
"""Writes ONNX's backend node test cases (model.onnx + test_data_set_0/*.pb) with Debian's
python3-onnx. Usage: tests/onnx/generate_cases.py OUTDIR

python3-onnx 1.12 still uses NumPy aliases that NumPy 1.24 removed; they are put back first.
"""
import sys

import numpy as np

for alias, real in (("float", float), ("int", int), ("bool", bool), ("object", object),
                    ("complex", complex), ("str", str)):
    if not hasattr(np, alias):
        setattr(np, alias, real)

from onnx.backend.test import cmd_tools  # noqa: E402

if len(sys.argv) != 2:
    sys.exit("usage: generate_cases.py OUTDIR")
sys.argv = ["generate_cases", "generate-data", "-o", sys.argv[1]]
cmd_tools.main()

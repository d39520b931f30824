"""lumen.Model: an ONNX model loaded by lumen.load_onnx, compiled for a device and called like a
torch module. Runs release the GIL, so several Python threads can run models at once."""
from typing import NamedTuple

import numpy as np

from . import _lumen
from ._lumen import Tensor


class TensorInfo(NamedTuple):
    """A model input or output: its name, shape (a symbolic dimension is its name, a str) and
    dtype."""
    name: str
    shape: tuple
    dtype: object


class Model:
    """An ONNX model. Compiled plans are made per set of input shapes on first use and reused."""

    def __init__(self, path):
        """Reads and checks the file; raises lumen.IoError, InvalidModel or UnsupportedOp."""
        self.path = str(path)
        self.device = "auto"
        self.precision = "fp32"
        self._session = _lumen._Session(self.path, [])
        self._names = [name for name, _, _, _ in self._session.inputs]
        self._shapes = None
        self._feeds_last = None
        self._backends = []
        self._generator = None
        self.generation_stats = None

    def compile(self, device="auto", precision="fp32", plan_per_shape=False):
        """Chooses where the model runs: "auto" (every available backend, placed by Lumen's
        router), "cpu", "cuda" or "vulkan" (lumen.DeviceError when this build or machine has
        none).
        precision: "fp32" (float32 accuracy; on CUDA large products may run as 3xTF32, within
        float32's error bound), "fp32-strict" (every CUDA float32 product in float32 FMAs), "tf32" (CUDA matrix products and convolutions on TF32
        tensor cores; the CPU is unaffected), or "fp16" (what runs on CUDA stores its values as
        float16 and uses tensor cores, computing in float32 inside each kernel; inputs and outputs
        stay float32; the CPU is unaffected), or "bf16" (the same with bfloat16).
        New sizes of the model's symbolic dims (batch, sequence) are planned without a compile
        where the model allows (see stats()); plan_per_shape=True compiles each set of input
        shapes on its own instead (for comparisons). Returns the model."""
        if device == "auto":
            backends = ["auto"]  # the router: each node where it is predicted to run fastest
        else:
            backends = [_lumen._device(device).split(":")[0]]
        if precision not in ("fp32", "fp32-strict", "tf32", "fp16", "bf16"):
            raise _lumen.InvalidArgument(f"compile: precision must be 'fp32', 'fp32-strict', "
                                         f"'tf32', 'fp16' or 'bf16', got {precision!r}")
        self._session = _lumen._Session(self.path, backends, precision, plan_per_shape)
        self.device, self.precision = device, precision
        self._backends, self._generator = backends, None
        return self

    def stats(self):
        """What the model's session did for the shapes it ran: a dict of "compiles" (plans
        imported, optimized and compiled), "sized" (plans made for new sizes of the symbolic dims
        without a compile), "families", "kernels_shared" and "kernels_built" (by those plans),
        and "refused" (why the last model pattern that could not be planned for every size was
        not, or "")."""
        return self._session.stats()

    def _feeds(self, args, kwargs):
        if len(args) > len(self._names):
            raise _lumen.InvalidArgument(f"{self.path}: {len(args)} inputs given, the model takes "
                                         f"{len(self._names)} ({', '.join(self._names)})")
        feeds = dict(zip(self._names, args))
        feeds.update(kwargs)
        return feeds

    def __call__(self, *args, **kwargs):
        """model(x) or model(x1, x2) or model(image=x): inputs in the model's order or by name
        (lumen Tensors or NumPy arrays); returns a Tensor, or a tuple for several outputs."""
        feeds = self._feeds(args, kwargs)
        outputs = self._session.run(feeds)
        self._remember(feeds)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def run(self, inputs, out=None):
        """Runs with inputs as {name: array or Tensor} (or a list in the model's order) and
        returns {output name: NumPy array} (views of Lumen's output memory). With out={name:
        array}, each named output is written into the caller's array (allocated once, reused
        every call; its shape and dtype must match) and `out` is returned."""
        if not isinstance(inputs, dict):
            inputs = self._feeds(tuple(inputs), {})
        results = self._session.run(inputs)
        self._remember(inputs)
        names = self._session.output_names
        if out is None:
            return {name: r.numpy() for name, r in zip(names, results)}
        by_name = dict(zip(names, results))
        for name, array in out.items():
            if name not in by_name:
                raise _lumen.InvalidArgument(f"run: the model has no output named {name!r} "
                                             f"(outputs: {', '.join(names)})")
            r = by_name[name]
            if not isinstance(array, np.ndarray) or tuple(array.shape) != r.shape or \
                    _lumen._to_dtype(array.dtype) != r.dtype:
                raise _lumen.ShapeError(
                    f"run: out[{name!r}] must be a NumPy array of {r.dtype} {list(r.shape)}, got "
                    f"{getattr(array, 'dtype', type(array).__name__)} "
                    f"{list(getattr(array, 'shape', []))}")
            np.copyto(array, r.numpy())
        return out

    def _start(self, input_ids, max_new_tokens, do_sample, temperature, top_k, top_p,
               eos_token_id, seed, attention_mask, pad_token_id):
        if self._generator is None:
            self._generator = _lumen._Generator(self.path, self._backends, self.precision)
        ids = np.asarray(input_ids)
        if ids.ndim == 1:
            ids = ids[None, :]
        if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
            raise _lumen.InvalidArgument(
                f"generate: input_ids must be integer token ids [batch, seq], got "
                f"{ids.dtype} {list(ids.shape)}")
        if attention_mask is None:
            prompts = [[int(t) for t in row] for row in ids]
        else:
            mask = np.asarray(attention_mask)
            if mask.shape != ids.shape:
                raise _lumen.ShapeError(f"generate: attention_mask {list(mask.shape)} must match "
                                        f"input_ids {list(ids.shape)}")
            prompts = [[int(t) for t, m in zip(row, mrow) if m] for row, mrow in zip(ids, mask)]
        return self._generator.start(
            prompts, max_new_tokens=int(max_new_tokens), do_sample=bool(do_sample),
            temperature=float(temperature), top_k=int(top_k), top_p=float(top_p),
            eos_token_id=-1 if eos_token_id is None else int(eos_token_id), seed=int(seed),
            pad_token_id=int(pad_token_id))

    def generate(self, input_ids, max_new_tokens=32, do_sample=False, temperature=1.0, top_k=0,
                 top_p=1.0, eos_token_id=None, seed=0, attention_mask=None, pad_token_id=0):
        """Generates from an ONNX decoder with a key/value cache (inputs input_ids,
        attention_mask, position_ids, past_key_values.N.key/.value; outputs logits,
        present.N.key/.value). input_ids: [batch, seq] token ids (or one list); with
        attention_mask, the zeros mark left padding. Greedy unless do_sample (temperature, top_k,
        top_p, seed). A sequence stops at eos_token_id; its later places hold pad_token_id.
        Returns the new ids as an int64 array [batch, new]; generation_stats then holds the
        prefill and decode times and rates. Raises lumen.InvalidArgument for bad ids or options,
        lumen.InvalidModel for a model that is not such a decoder."""
        gen = self._start(input_ids, max_new_tokens, do_sample, temperature, top_k, top_p,
                          eos_token_id, seed, attention_mask, pad_token_id)
        steps = []
        while True:
            step = gen.next()
            if step is None:
                break
            steps.append(step)
        self.generation_stats = gen.stats
        if not steps:
            return np.zeros((gen.stats["batch"], 0), dtype=np.int64)
        return np.asarray(steps, dtype=np.int64).T.copy()

    def generate_stream(self, input_ids, max_new_tokens=32, do_sample=False, temperature=1.0,
                        top_k=0, top_p=1.0, eos_token_id=None, seed=0, attention_mask=None,
                        pad_token_id=0):
        """generate() one step at a time: yields each step's new ids, an int64 array [batch],
        as it is made (generation_stats is set when the iteration ends)."""
        gen = self._start(input_ids, max_new_tokens, do_sample, temperature, top_k, top_p,
                          eos_token_id, seed, attention_mask, pad_token_id)
        while True:
            step = gen.next()
            if step is None:
                break
            yield np.asarray(step, dtype=np.int64)
        self.generation_stats = gen.stats

    def _remember(self, feeds):
        """Keeps the last run's input shapes, and the inputs themselves where their values decide
        shapes (value_inputs), so that outputs and summary describe that run's plan."""
        self._shapes = {k: tuple(v.shape) for k, v in feeds.items()}
        self._feeds_last = dict(feeds) if self._session.value_inputs else None

    @property
    def value_inputs(self):
        """Names of the inputs whose values decide shapes (a Reshape's shape, a Reduce's axes,
        TopK's K given at run time): each new value compiles (and caches) a plan of its own."""
        return list(self._session.value_inputs)

    def _plan_shapes(self):
        if self._shapes is not None:
            return self._shapes
        return {name: [d if d >= 0 else 1 for d in dims]
                for name, _, dims, _ in self._session.inputs}

    @property
    def inputs(self):
        """The inputs as the model declares them: [TensorInfo(name, shape, dtype)]; a symbolic
        dimension is its name (a str)."""
        return [TensorInfo(name, tuple(sym if d < 0 else d for d, sym in zip(dims, symbols)),
                           dtype)
                for name, dtype, dims, symbols in self._session.inputs]

    @property
    def outputs(self):
        """The outputs with the shapes of the last run's input shapes (or, before any run, of the
        declared shapes with every symbolic dimension 1)."""
        if self._session.value_inputs:
            if self._feeds_last is None:
                raise _lumen.InvalidArgument(
                    f"{self.path}: outputs depend on the values of {self.value_inputs}; run the "
                    "model first")
            plan = self._session.plan_outputs_for(self._feeds_last)
        else:
            plan = self._session.plan_outputs(self._plan_shapes())
        return [TensorInfo(name, shape, dtype) for name, dtype, shape in plan]

    def summary(self):
        """A text summary: file, opset, inputs, outputs and the compiled steps with their
        backends (for the last run's input shapes)."""
        lines = [f"Model {self.path} (opset {self._session.opset}, producer "
                 f"{self._session.producer or '?'}), device {self.device}, {self.precision}"]
        lines += [f"  input  {i.name}: {i.dtype} {list(i.shape)}" for i in self.inputs]
        lines += [f"  output {o.name}: {o.dtype} {list(o.shape)}" for o in self.outputs]
        summary = (self._session.plan_summary_for(self._feeds_last) if self._session.value_inputs
                   else self._session.plan_summary(self._plan_shapes()))
        lines.append("plan: " + summary.rstrip())
        return "\n".join(lines)

    def __repr__(self):
        return f"lumen.Model({self.path!r}, device={self.device!r})"


def load_onnx(path):
    """Loads an ONNX file as a Model (call .compile(device=...) to choose a device; the default
    is "auto"). Raises lumen.IoError for a missing or unreadable file, lumen.InvalidModel for a
    malformed one, lumen.UnsupportedOp naming a node Lumen cannot run."""
    return Model(path)

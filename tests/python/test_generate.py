"""Generation (issue 28): the tiny decoders of tests/models/export_decoders.py (GPT-2-like,
Llama-like with grouped-query attention and rotary positions, and the GPT-2 weights around the
opset-23 Attention op), exported into a temporary folder, against PyTorch's greedy references;
seeded sampling; bad input."""
import os
import sys

import numpy as np
import pytest
import torch

import lumen

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
import decoder_models as dm  # noqa: E402
import export_decoders as ed  # noqa: E402

MODELS = ("gpt2-tiny", "llama-tiny", "gpt2-attention23-tiny")
DEVICES = ["cpu"] + (["cuda"] if "cuda" in lumen.backends() else [])


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{name: (folder, path)} of the three tiny decoders with their reference files."""
    torch.set_num_threads(2)
    folder = str(tmp_path_factory.mktemp("decoders"))
    return {name: ed.export(name, folder, log=lambda _: None) for name in MODELS}


@pytest.fixture(scope="module")
def compiled():
    """Compiled models, one per (path, device), shared by the tests of this file."""
    cache = {}

    def get(path, device):
        if (path, device) not in cache:
            cache[(path, device)] = lumen.load_onnx(path).compile(device)
        return cache[(path, device)]
    return get


def reference(path, key):
    return np.load(path[:-len(".onnx")] + f".{key}.npy")


@pytest.mark.parametrize("name", MODELS)
def test_one_step_matches_torch(exported, compiled, name):
    """The exported file run by model.run: a padded batch of 2 after 3 masked past slots (the
    static-cache form Lumen's Generator feeds), logits at real positions and presents."""
    path = exported[name]
    model = dm.build(ed.base_config(name))
    c = model.c
    ids, mask = reference(path, "prompt2"), reference(path, "mask2")
    full_mask = np.concatenate([np.zeros((2, 3), np.int64), mask], 1)
    pos = dm.prompt_positions(torch.from_numpy(mask)).numpy()
    past = [np.random.default_rng(i).standard_normal((2, c.kv_heads, 3, c.head_dim))
            .astype(np.float32) for i in range(2 * c.layers)]
    with torch.no_grad():
        want = model(torch.from_numpy(ids), torch.from_numpy(full_mask), torch.from_numpy(pos),
                     *[torch.from_numpy(p) for p in past])
    inputs, outputs = dm.io_names(c.layers)
    got = compiled(path, "cpu").run(dict(zip(inputs, [ids, full_mask, pos] + past)))
    real = mask != 0
    logits = want[0].numpy()
    assert np.abs(got["logits"][real] - logits[real]).max() <= 1e-4 * np.abs(logits).max()
    slots = full_mask[1] != 0  # row 1's real slots (row 0's are a superset)
    for name_out, w in zip(outputs[1:], want[1:]):
        w = w.numpy()[:, :, slots]
        assert np.abs(got[name_out][:, :, slots] - w).max() <= 1e-5 * max(1.0, np.abs(w).max())


@pytest.mark.parametrize("device", ["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
@pytest.mark.parametrize("name", ["gpt2-tiny", "llama-tiny"])
def test_static_cache_decoder_matches_reference(exported, name, device):
    """The benchmark's static-cache PyTorch decoder (a CUDA graph on the GPU) gives the reference
    tokens, batch 1 and the padded batch 2."""
    path = exported[name]
    model = dm.build(name).to(device)
    for ids, mask, want in ((reference(path, "prompt"), None, reference(path, "greedy")),
                            (reference(path, "prompt2"), reference(path, "mask2"),
                             reference(path, "greedy2"))):
        mask = np.ones_like(ids) if mask is None else mask
        gen = dm.StaticCacheDecoder(model, ids.shape[0], ids.shape[1] + want.shape[1], device,
                                    cuda_graph=device == "cuda")
        tokens = [gen.prefill(ids, mask)]
        tokens += [gen.decode().clone() for _ in range(want.shape[1] - 1)]
        np.testing.assert_array_equal(torch.cat(tokens, 1).cpu().numpy(), want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", MODELS)
def test_greedy_matches_torch(exported, compiled, name, device):
    path = exported[name]
    model = compiled(path, device)
    prompt, want = reference(path, "prompt"), reference(path, "greedy")
    got = model.generate(prompt, max_new_tokens=want.shape[1])
    assert isinstance(got, np.ndarray) and got.dtype == np.int64 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    stats = model.generation_stats
    assert stats["prompt_tokens"] == prompt.shape[1]
    assert stats["new_tokens"] in (want.shape[1], want.shape[1] - 1)
    assert stats["prefill_s"] > 0 and stats["decode_s"] > 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", MODELS)
def test_greedy_left_padded_batch(exported, compiled, name, device):
    """Two prompts of 13 and 9 tokens in one batch (the shorter left-padded, attention_mask 0
    there): each continues as PyTorch's padded batch does."""
    path = exported[name]
    ids, mask = reference(path, "prompt2"), reference(path, "mask2")
    want = reference(path, "greedy2")
    got = compiled(path, device).generate(ids, max_new_tokens=want.shape[1], attention_mask=mask)
    np.testing.assert_array_equal(got, want)
    # the same with other padding ids: masked places do not matter
    ids = np.where(mask != 0, ids, 7)
    got = compiled(path, device).generate(ids, max_new_tokens=want.shape[1], attention_mask=mask)
    np.testing.assert_array_equal(got, want)


def test_sampling_is_seeded(exported, compiled):
    path = exported["llama-tiny"]
    model = compiled(path, "cpu")
    prompt = reference(path, "prompt")
    a = model.generate(prompt, max_new_tokens=24, do_sample=True, seed=7)
    b = model.generate(prompt, max_new_tokens=24, do_sample=True, seed=7)
    c = model.generate(prompt, max_new_tokens=24, do_sample=True, seed=8)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert ((a >= 0) & (a < 1000)).all()
    nucleus = model.generate(prompt, max_new_tokens=24, do_sample=True, temperature=0.7,
                             top_k=50, top_p=0.9, seed=3)
    np.testing.assert_array_equal(
        nucleus, model.generate(prompt, max_new_tokens=24, do_sample=True, temperature=0.7,
                                top_k=50, top_p=0.9, seed=3))
    top1 = model.generate(prompt, max_new_tokens=24, do_sample=True, top_k=1, seed=5)
    np.testing.assert_array_equal(top1, reference(path, "greedy")[:, :24])


def test_eos_stops_a_sequence(exported, compiled):
    path = exported["gpt2-tiny"]
    want = reference(path, "greedy")[0]
    eos = int(want[5])
    first = int(np.argmax(want == eos))  # eos may come earlier than index 5
    got = np.asarray(compiled(path, "cpu").generate(reference(path, "prompt"), max_new_tokens=20,
                                                    eos_token_id=eos))
    np.testing.assert_array_equal(got[0, :first + 1], want[:first + 1])
    assert got.shape[1] == first + 1 or (got[0, first + 1:] == 0).all()  # then pad_token_id 0


def test_bad_inputs(exported, compiled):
    path = exported["gpt2-tiny"]
    model = compiled(path, "cpu")
    prompt = reference(path, "prompt")
    for n in (0, -1):
        with pytest.raises(lumen.InvalidArgument, match="max_new_tokens"):
            model.generate(prompt, max_new_tokens=n)
    for bad in (1000, 5000, -1):  # the tiny vocabulary has 1000 words
        ids = prompt.copy()
        ids[0, 3] = bad
        with pytest.raises(lumen.InvalidArgument, match="input_ids"):
            model.generate(ids, max_new_tokens=4)
    # 12 prompt tokens + 200 new ones pass GPT-2 tiny's 128 positions: a clear error, no crash
    with pytest.raises(lumen.Error):
        model.generate(prompt, max_new_tokens=200)
    # and the model still generates afterwards
    np.testing.assert_array_equal(model.generate(prompt, max_new_tokens=8),
                                  reference(path, "greedy")[:, :8])

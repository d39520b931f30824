"""Plain-PyTorch decoders (no transformers library) for Lumen's generation tests and benchmark: a
GPT-2-like and a Llama-like model with random weights, in the Hugging Face / Optimum cache form

    forward(input_ids, attention_mask, position_ids, past.0.key, past.0.value, ...)
        -> (logits, present.0.key, present.0.value, ...)

input_ids / position_ids int64 [batch, seq], attention_mask int64 [batch, past + seq] (0: that
key is masked out), past and present float32 [batch, kv_heads, past (+ seq), head_dim]. Attention
is causal by absolute slot: query i of a call sees every past slot the mask allows and the new
keys 0..i, so a static cache whose unused slots are masked gives the same tokens as a growing one.

Also here: greedy generation with a growing cache (the reference) and with a static cache whose
decode step can be captured as a CUDA graph (the benchmark's fastest PyTorch form).
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

NEG = torch.finfo(torch.float32).min  # Hugging Face's additive bias for a masked key


@dataclass(frozen=True)
class Config:
    """One decoder's shape. arch: "gpt2" (learned positions, LayerNorm, GELU(tanh) MLP, biases) or
    "llama" (rotary positions, RMSNorm, SwiGLU MLP, no biases); heads / kv_heads > 1 is
    grouped-query attention; max_positions bounds GPT-2's position table (0: no bound)."""
    arch: str
    vocab: int
    d: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    max_positions: int = 0
    rope_theta: float = 10000.0
    eps: float = 1e-5

    @property
    def head_dim(self):
        return self.d // self.heads


CONFIGS = {
    "gpt2": Config("gpt2", vocab=50257, d=768, layers=12, heads=12, kv_heads=12, ffn=3072,
                   max_positions=1024),
    "gpt2-tiny": Config("gpt2", vocab=1000, d=64, layers=2, heads=4, kv_heads=4, ffn=256,
                        max_positions=128),
    # About 0.5 B parameters: 24 x (2.6 M attention + 15.7 M MLP) + 2 x 32.8 M embeddings/head.
    "llama": Config("llama", vocab=32000, d=1024, layers=24, heads=16, kv_heads=4, ffn=5120,
                    eps=1e-6),
    "llama-tiny": Config("llama", vocab=1000, d=64, layers=2, heads=4, kv_heads=2, ffn=192,
                         eps=1e-6),
}


def split_heads(x, heads):
    """[b, s, heads * hd] -> [b, heads, s, hd]."""
    return x.reshape(x.shape[0], x.shape[1], heads, -1).transpose(1, 2)


def repeat_kv(x, rep):
    """[b, kv, t, hd] -> [b, kv * rep, t, hd], each kv head serving rep query heads (as Hugging
    Face's repeat_kv)."""
    if rep == 1:
        return x
    b, kv, t, hd = x.shape
    return x[:, :, None].expand(b, kv, rep, t, hd).reshape(b, kv * rep, t, hd)


def attention_bias(attention_mask, seq):
    """The additive bias [b, 1, seq, total] of a call with `seq` new tokens: 0 where query i may
    see key slot j (mask 1 and j <= past + i), NEG elsewhere."""
    total = attention_mask.shape[1]
    q_slot = torch.arange(seq, device=attention_mask.device) + (total - seq)
    k_slot = torch.arange(total, device=attention_mask.device)
    causal = k_slot[None, :] <= q_slot[:, None]
    allowed = causal[None, None] & (attention_mask[:, None, None, :] != 0)
    return (~allowed).to(torch.float32) * NEG


def attend(q, k, v, bias, c):
    """Scaled dot-product attention of q [b, heads, s, hd] over k, v [b, kv_heads, t, hd] (Config
    c) with an additive bias; returns [b, s, heads * hd]."""
    k, v = repeat_kv(k, c.heads // c.kv_heads), repeat_kv(v, c.heads // c.kv_heads)
    scores = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(c.head_dim)) + bias
    y = torch.matmul(torch.softmax(scores, dim=-1), v)
    return y.transpose(1, 2).reshape(y.shape[0], y.shape[2], -1)


class Gpt2Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.ln_1 = nn.LayerNorm(c.d, eps=c.eps)
        self.qkv = nn.Linear(c.d, c.d + 2 * c.kv_heads * c.head_dim)
        self.proj = nn.Linear(c.d, c.d)
        self.ln_2 = nn.LayerNorm(c.d, eps=c.eps)
        self.fc = nn.Linear(c.d, c.ffn)
        self.out = nn.Linear(c.ffn, c.d)

    def qkv_heads(self, x, position_ids):
        c = self.c
        q, k, v = self.qkv(self.ln_1(x)).split([c.d, c.kv_heads * c.head_dim,
                                                c.kv_heads * c.head_dim], dim=2)
        return split_heads(q, c.heads), split_heads(k, c.kv_heads), split_heads(v, c.kv_heads)

    def finish(self, x, y):
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        kv = c.kv_heads * c.head_dim
        self.input_norm = RMSNorm(c.d, c.eps)
        self.q = nn.Linear(c.d, c.d, bias=False)
        self.k = nn.Linear(c.d, kv, bias=False)
        self.v = nn.Linear(c.d, kv, bias=False)
        self.o = nn.Linear(c.d, c.d, bias=False)
        self.post_norm = RMSNorm(c.d, c.eps)
        self.gate = nn.Linear(c.d, c.ffn, bias=False)
        self.up = nn.Linear(c.d, c.ffn, bias=False)
        self.down = nn.Linear(c.ffn, c.d, bias=False)
        hd = c.head_dim
        self.register_buffer("inv_freq", 1.0 / (c.rope_theta ** (
            torch.arange(0, hd, 2, dtype=torch.float32) / hd)), persistent=False)

    def qkv_heads(self, x, position_ids):
        c = self.c
        h = self.input_norm(x)
        q, k, v = (split_heads(self.q(h), c.heads), split_heads(self.k(h), c.kv_heads),
                   split_heads(self.v(h), c.kv_heads))
        angles = position_ids[:, :, None].to(torch.float32) * self.inv_freq  # [b, s, hd/2]
        angles = torch.cat([angles, angles], dim=-1)[:, None]  # [b, 1, s, hd]
        cos, sin = angles.cos(), angles.sin()
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, v

    def finish(self, x, y):
        x = x + self.o(y)
        h = self.post_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Decoder(nn.Module):
    """A decoder of Config c. forward is the ONNX-exported form (flat past/present tuples)."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.vocab, c.d)
        if c.arch == "gpt2":
            self.positions = nn.Embedding(c.max_positions, c.d)
            self.blocks = nn.ModuleList(Gpt2Block(c) for _ in range(c.layers))
            self.norm = nn.LayerNorm(c.d, eps=c.eps)
        else:
            self.blocks = nn.ModuleList(LlamaBlock(c) for _ in range(c.layers))
            self.norm = RMSNorm(c.d, c.eps)
        self.head = nn.Linear(c.d, c.vocab, bias=False)  # untied: see init_weights

    def init_weights(self, seed):
        """GPT-2's init (normal, std 0.02; residual projections 0.02 / sqrt(2 * layers); zero
        biases; unit norms), from torch.manual_seed(seed). The head is untied with std
        1 / sqrt(d), so logits have about unit spread: a tied head would make each token's own
        embedding its most likely successor and greedy decoding would repeat one token."""
        c = self.c
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    p.zero_()
                elif "norm" in name or "ln_" in name:
                    p.fill_(1.0)
                else:
                    std = 0.02
                    if name.endswith(("proj.weight", "out.weight", "o.weight", "down.weight")):
                        std = 0.02 / math.sqrt(2 * c.layers)
                    if name == "head.weight":
                        std = 1.0 / math.sqrt(c.d)
                    p.copy_(torch.randn(p.shape, generator=g) * std)
        return self

    def hidden(self, input_ids, position_ids):
        x = self.embed(input_ids)
        if self.c.arch == "gpt2":
            x = x + self.positions(position_ids)
        return x

    def forward(self, input_ids, attention_mask, position_ids, *past):
        c = self.c
        bias = attention_bias(attention_mask, input_ids.shape[1])
        x = self.hidden(input_ids, position_ids)
        presents = []
        for i, block in enumerate(self.blocks):
            q, k, v = block.qkv_heads(x, position_ids)
            k = torch.cat([past[2 * i], k], dim=2)
            v = torch.cat([past[2 * i + 1], v], dim=2)
            presents += [k, v]
            x = block.finish(x, attend(q, k, v, bias, c))
        return (self.head(self.norm(x)),) + tuple(presents)

    def empty_past(self, batch, device="cpu"):
        c = self.c
        return [torch.zeros(batch, c.kv_heads, 0, c.head_dim, device=device)
                for _ in range(2 * c.layers)]


def build(name, seed=0):
    """The decoder `name` of CONFIGS ("gpt2", "llama", "gpt2-tiny", "llama-tiny") with the random
    weights of `seed`, in eval mode."""
    return Decoder(CONFIGS[name]).init_weights(seed).eval()


def io_names(layers):
    """(input names, output names) of the exported form."""
    past = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    present = [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    return ["input_ids", "attention_mask", "position_ids"] + past, ["logits"] + present


def prompt_positions(mask):
    """position_ids of a (left-)padded prompt: each real token's index among the real tokens of
    its row; padding gets 1 (Hugging Face's convention; masked out, so any value works)."""
    pos = mask.long().cumsum(1) - 1
    return pos.masked_fill(mask == 0, 1)


@torch.inference_mode()
def greedy(model, ids, mask, new_tokens, device="cpu", timings=None):
    """Greedy continuation of `new_tokens` tokens with a growing cache (the reference): ids, mask
    int64 [b, s] (left-padded rows have mask 0 there). Returns (tokens [b, new_tokens], the
    smallest gap between the best and second-best logit over every step and row, the logits of
    the prompt [b, s, vocab] and of the first decode step [b, vocab]). With timings (a dict), sets
    prefill_s and decode_s (synchronising CUDA) and leaves the gap out (nan)."""
    import time
    ids = torch.as_tensor(ids, device=device)
    mask = torch.as_tensor(mask, device=device)
    sync = torch.cuda.synchronize if device != "cpu" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    outs = model(ids, mask, prompt_positions(mask), *model.empty_past(ids.shape[0], device))
    prompt_logits, past = outs[0], list(outs[1:])
    last = prompt_logits[:, -1]
    pos = prompt_positions(mask)[:, -1:] + 1
    tokens, gaps, step_logits = [], [], None
    for step in range(new_tokens):
        if timings is None:  # .item() waits for the device: not in timed runs
            top2 = last.topk(2, dim=-1).values
            gaps.append((top2[:, 0] - top2[:, 1]).min().item())
        token = last.argmax(-1, keepdim=True)
        tokens.append(token)
        if step == 0:
            sync()
            t1 = time.perf_counter()
        if step + 1 == new_tokens:
            break
        mask = torch.cat([mask, torch.ones_like(token)], dim=1)
        outs = model(token, mask, pos, *past)
        last, past = outs[0][:, -1], list(outs[1:])
        if step == 0:
            step_logits = last
        pos = pos + 1
    sync()
    if timings is not None:
        timings["prefill_s"] = t1 - t0
        timings["decode_s"] = time.perf_counter() - t1
    return (torch.cat(tokens, dim=1).cpu().numpy(), min(gaps, default=float("nan")),
            prompt_logits.cpu().numpy(),
            None if step_logits is None else step_logits.cpu().numpy())


class StaticCacheDecoder:
    """Greedy generation with a preallocated cache of `capacity` slots per sequence: the prompt
    fills slots 0..s-1 and decode step t writes slot s+t in place (index_copy_), attending over
    every slot through a key-validity mask kept on the device. All of a decode step's tensors are
    static, so on CUDA (cuda_graph=True) the step is captured once as a torch.cuda.CUDAGraph and
    replayed (the prompt runs eagerly)."""

    def __init__(self, model, batch, capacity, device="cpu", cuda_graph=False):
        c = model.c
        self.model, self.batch, self.capacity, self.device = model, batch, capacity, device
        self.k = [torch.zeros(batch, c.kv_heads, capacity, c.head_dim, device=device)
                  for _ in range(c.layers)]
        self.v = [torch.zeros_like(k) for k in self.k]
        self.valid = torch.zeros(batch, capacity, dtype=torch.bool, device=device)
        self.token = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.pos = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.slot = torch.zeros(1, dtype=torch.long, device=device)
        self.logits = None
        self.graph = None
        self.cuda_graph = cuda_graph

    def _layers(self, x, position_ids, slots, bias):
        model, c = self.model, self.model.c
        for i, block in enumerate(model.blocks):
            q, k, v = block.qkv_heads(x, position_ids)
            self.k[i].index_copy_(2, slots, k)
            self.v[i].index_copy_(2, slots, v)
            x = block.finish(x, attend(q, self.k[i], self.v[i], bias, c))
        return model.head(model.norm(x))[:, -1]

    def _step(self):
        self.valid.index_fill_(1, self.slot, True)
        bias = (~self.valid[:, None, None, :]).to(torch.float32) * NEG
        x = self.model.hidden(self.token, self.pos)
        self.logits = self._layers(x, self.pos, self.slot, bias)
        self.slot.add_(1)
        self.pos.add_(1)

    @torch.inference_mode()
    def prefill(self, ids, mask):
        """Runs the prompt ids, mask [b, s] into slots 0..s-1; returns the first tokens [b, 1]."""
        ids = torch.as_tensor(ids, device=self.device)
        mask = torch.as_tensor(mask, device=self.device)
        s = ids.shape[1]
        self.valid.zero_()
        self.valid[:, :s] = mask != 0
        slots = torch.arange(s, device=self.device)
        full = torch.zeros(self.batch, self.capacity, dtype=torch.long, device=self.device)
        full[:, :s] = mask
        bias = attention_bias(full, self.capacity)[:, :, :s]  # query i sees slots <= i
        positions = prompt_positions(mask)
        logits = self._layers(self.model.hidden(ids, positions), positions, slots, bias)
        self.slot.fill_(s)
        self.pos.copy_(positions[:, -1:] + 1)
        self.token.copy_(logits.argmax(-1, keepdim=True))
        return self.token.clone()

    @torch.inference_mode()
    def decode(self):
        """One step from the last token; returns the next tokens [b, 1]."""
        if self.cuda_graph:
            if self.graph is None:
                self._capture()
            self.graph.replay()
        else:
            self._step()
        self.token.copy_(self.logits.argmax(-1, keepdim=True))
        return self.token

    def _capture(self):
        saved = [t.clone() for t in self.k + self.v + [self.valid, self.slot, self.pos]]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):  # warm up kernels and allocator outside the graph
                self._step()
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._step()
        for t, s in zip(self.k + self.v + [self.valid, self.slot, self.pos], saved):
            t.copy_(s)  # undo the warm-up and capture steps

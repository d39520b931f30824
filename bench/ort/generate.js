// ONNX Runtime CPU (onnxruntime-node) greedy generation with a key/value cache, for
// bench/generate.py and tests/models/export_decoders.py --check.
//   node bench/ort/generate.js MODEL.onnx --ids IDS.npy [--mask MASK.npy] --max-new-tokens N
//        [--threads 2] [--out OUT.npy] [--dump-logits DIR] [--warmup N]
// The model has the Hugging Face / Optimum decoder form (input_ids, attention_mask, position_ids,
// past_key_values.N.key/.value -> logits, present.N.key/.value). The prompt (int64 [batch, seq],
// rows left-padded where MASK is 0; no MASK: all ones) runs with an empty past; each later step
// feeds the last token with the previous step's present outputs as its past (a growing cache,
// as Optimum's ORT generation does). position_ids count each row's real tokens. --warmup N first
// runs an untimed generation of N tokens. Writes the new tokens (int64 [batch, N]) to --out,
// with --dump-logits the prompt's logits (DIR/prefill_logits.npy) and the first decode step's
// (DIR/step1_logits.npy), and prints one JSON line: {"create_ms", "prefill_s" (the prompt's run
// and the first token's choice), "decode_s" (the N - 1 later steps), "batch", "prompt_tokens",
// "new_tokens"}.
'use strict';
const path = require('path');
const ort = require('onnxruntime-node');
const {read_npy, write_npy} = require('./npy.js');

function parse_args(argv) {
  const args = {model: argv[0], ids: '', mask: '', new_tokens: 0, threads: 2, out: '', dump: '',
    warmup: 0};
  for (let i = 1; i < argv.length; i += 2) {
    const flag = argv[i], value = argv[i + 1];
    if (flag === '--ids') args.ids = value;
    else if (flag === '--mask') args.mask = value;
    else if (flag === '--max-new-tokens') args.new_tokens = Number(value);
    else if (flag === '--threads') args.threads = Number(value);
    else if (flag === '--out') args.out = value;
    else if (flag === '--dump-logits') args.dump = value;
    else if (flag === '--warmup') args.warmup = Number(value);
    else throw new Error(`generate.js: unknown flag ${flag}`);
  }
  if (!args.model || !args.ids || !(args.new_tokens >= 1)) {
    throw new Error('usage: generate.js MODEL.onnx --ids IDS.npy --max-new-tokens N [...]');
  }
  return args;
}

// Index of the largest of each row's last-position logits ([batch, seq, vocab]); first on a tie.
function argmax_last(logits) {
  const [batch, seq, vocab] = logits.dims;
  const data = logits.data;
  const out = new BigInt64Array(batch);
  for (let b = 0; b < batch; ++b) {
    const base = (b * seq + seq - 1) * vocab;
    let best = 0;
    for (let v = 1; v < vocab; ++v) if (data[base + v] > data[base + best]) best = v;
    out[b] = BigInt(best);
  }
  return out;
}

// One generation; returns {tokens: BigInt64Array [batch * n], prefill_s, decode_s}.
async function generate(session, ids, mask, n, dump) {
  const [batch, seq] = ids.dims;
  const past_names = session.inputNames.filter((name) => name.startsWith('past_key_values.'));
  const feeds = {input_ids: ids, attention_mask: mask};
  const mask_rows = [];
  const next_pos = new BigInt64Array(batch);
  const pos = new BigInt64Array(batch * seq);
  for (let b = 0; b < batch; ++b) {
    let count = 0n;
    for (let s = 0; s < seq; ++s) {
      const real = mask.data[b * seq + s] !== 0n;
      pos[b * seq + s] = real ? count : 1n;
      if (real) ++count;
    }
    next_pos[b] = count;
    mask_rows.push(Array.from(mask.data.subarray(b * seq, (b + 1) * seq)));
  }
  feeds.position_ids = new ort.Tensor('int64', pos, [batch, seq]);
  for (const meta of session.inputMetadata) {
    if (!past_names.includes(meta.name)) continue;
    const [, kv_heads, , head_dim] = meta.shape;
    feeds[meta.name] = new ort.Tensor('float32', new Float32Array(0), [batch, kv_heads, 0, head_dim]);
  }
  const tokens = new BigInt64Array(batch * n);
  const t0 = process.hrtime.bigint();
  let out = await session.run(feeds);
  let next = argmax_last(out.logits);
  const t1 = process.hrtime.bigint();
  if (dump) write_npy(path.join(dump, 'prefill_logits.npy'), out.logits);
  for (let step = 0; step < n; ++step) {
    for (let b = 0; b < batch; ++b) tokens[b * n + step] = next[b];
    if (step + 1 === n) break;
    for (let b = 0; b < batch; ++b) mask_rows[b].push(1n);
    const total = mask_rows[0].length;
    const mask_data = new BigInt64Array(batch * total);
    for (let b = 0; b < batch; ++b) mask_data.set(mask_rows[b], b * total);
    const step_feeds = {
      input_ids: new ort.Tensor('int64', next, [batch, 1]),
      attention_mask: new ort.Tensor('int64', mask_data, [batch, total]),
      position_ids: new ort.Tensor('int64', next_pos.slice(), [batch, 1]),
    };
    for (const name of past_names) step_feeds[name] = out[name.replace('past_key_values.', 'present.')];
    out = await session.run(step_feeds);
    for (let b = 0; b < batch; ++b) ++next_pos[b];
    next = argmax_last(out.logits);
    if (dump && step === 0) write_npy(path.join(dump, 'step1_logits.npy'), out.logits);
  }
  const t2 = process.hrtime.bigint();
  return {tokens, prefill_s: Number(t1 - t0) / 1e9, decode_s: Number(t2 - t1) / 1e9};
}

async function main() {
  const args = parse_args(process.argv.slice(2));
  const options = {
    intraOpNumThreads: args.threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
  };
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(args.model, options);
  const create_ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const ids = read_npy(args.ids);
  const mask = args.mask ? read_npy(args.mask) :
      new ort.Tensor('int64', new BigInt64Array(ids.data.length).fill(1n), ids.dims);
  if (args.warmup > 0) await generate(session, ids, mask, args.warmup, '');
  const result = await generate(session, ids, mask, args.new_tokens, args.dump);
  const batch = ids.dims[0];
  if (args.out) {
    write_npy(args.out, {type: 'int64', data: result.tokens, dims: [batch, args.new_tokens]});
  }
  console.log(JSON.stringify({
    create_ms, prefill_s: result.prefill_s, decode_s: result.decode_s, batch,
    prompt_tokens: ids.dims[1], new_tokens: args.new_tokens,
  }));
}

main().catch((e) => {
  console.error(`generate.js: ${e.message}`);
  process.exit(1);
});

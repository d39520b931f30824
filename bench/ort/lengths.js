// ONNX Runtime CPU (onnxruntime-node) over many input lengths in one session, for
// bench/dynamic_shapes.py.
//   node bench/ort/lengths.js MODEL.onnx --lengths 12,300,7 [--threads 2] [--repeat 5] [--vocab 1000]
// The model takes int64 input_ids [1, seq]. One session (all graph optimizations, N intra-op
// threads) runs each length in the order given: a first run, then `repeat` timed runs. Prints one
// JSON line: {"create_ms", "runs": [{"length", "first_ms", "median_ms"}, ...]}.
'use strict';
const ort = require('onnxruntime-node');

function parse_args(argv) {
  const args = {model: argv[0], lengths: [], threads: 2, repeat: 5, vocab: 1000};
  for (let i = 1; i < argv.length; i += 2) {
    const flag = argv[i], value = argv[i + 1];
    if (flag === '--lengths') args.lengths = value.split(',').map(Number);
    else if (flag === '--threads') args.threads = Number(value);
    else if (flag === '--repeat') args.repeat = Number(value);
    else if (flag === '--vocab') args.vocab = Number(value);
    else throw new Error(`lengths.js: unknown flag ${flag}`);
  }
  if (!args.model || args.lengths.length === 0) {
    throw new Error('usage: lengths.js MODEL.onnx --lengths A,B,C [--threads N] [--repeat N]');
  }
  return args;
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
  const name = session.inputNames[0];
  const runs = [];
  for (const length of args.lengths) {
    const data = new BigInt64Array(length);
    for (let i = 0; i < length; ++i) data[i] = BigInt(Math.floor(Math.random() * args.vocab));
    const feeds = {[name]: new ort.Tensor('int64', data, [1, length])};
    let t = process.hrtime.bigint();
    await session.run(feeds);
    const first_ms = Number(process.hrtime.bigint() - t) / 1e6;
    const times = [];
    for (let r = 0; r < args.repeat; ++r) {
      t = process.hrtime.bigint();
      await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    times.sort((a, b) => a - b);
    runs.push({length, first_ms, median_ms: times[Math.floor(times.length / 2)]});
  }
  console.log(JSON.stringify({create_ms, runs}));
}

main().catch((e) => {
  console.error(e.message);
  process.exit(1);
});

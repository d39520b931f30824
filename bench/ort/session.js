// ONNX Runtime CPU (onnxruntime-node) side of Lumen's benchmarks.
//   node bench/ort/session.js MODEL.onnx [--threads 2] [--repeat N] [--shape NAME=1x3x224x224]
//        [--input NAME=FILE.npy] [--output FILE.npy]
// Creates a session (all graph optimizations, N intra-op threads), feeds the given .npy inputs or
// random inputs of the model's declared shape (symbolic dims taken from --shape, else 1), runs it,
// writes the first output to --output, and prints one JSON line:
// {"create_ms": ..., "first_run_ms": ..., "median_ms": ..., "p90_ms": ...}.
'use strict';
const ort = require('onnxruntime-node');
const {read_npy, write_npy} = require('./npy.js');

function parse_args(argv) {
  const args = {model: argv[0], threads: 2, repeat: 10, shapes: {}, inputs: {}, output: ''};
  for (let i = 1; i < argv.length; i += 2) {
    const flag = argv[i], value = argv[i + 1];
    if (flag === '--threads') args.threads = Number(value);
    else if (flag === '--repeat') args.repeat = Number(value);
    else if (flag === '--shape') {
      const [name, dims] = value.split('=');
      args.shapes[name] = dims.split('x').map(Number);
    } else if (flag === '--input') {
      const [name, file] = value.split('=');
      args.inputs[name] = file;
    } else if (flag === '--output') args.output = value;
    else throw new Error(`session.js: unknown flag ${flag}`);
  }
  if (!args.model) throw new Error('usage: session.js MODEL.onnx [--threads N] [--repeat N]');
  return args;
}

function random_tensor(type, dims) {
  const n = dims.reduce((a, b) => a * b, 1);
  if (type === 'float32') {
    const data = new Float32Array(n);
    for (let i = 0; i < n; ++i) data[i] = Math.random() * 2 - 1;
    return new ort.Tensor('float32', data, dims);
  }
  if (type === 'int64') {
    const data = new BigInt64Array(n);
    for (let i = 0; i < n; ++i) data[i] = BigInt(Math.floor(Math.random() * 1000));
    return new ort.Tensor('int64', data, dims);
  }
  throw new Error(`session.js: input type ${type} is not handled`);
}

function percentile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
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
  const feeds = {};
  for (const meta of session.inputMetadata) {
    const dims = args.shapes[meta.name] ||
        meta.shape.map((d) => (typeof d === 'number' && d > 0 ? d : 1));
    feeds[meta.name] = args.inputs[meta.name] ? read_npy(args.inputs[meta.name]) :
                                                random_tensor(meta.type, dims);
  }
  const t1 = process.hrtime.bigint();
  const first = await session.run(feeds);
  const first_run_ms = Number(process.hrtime.bigint() - t1) / 1e6;
  if (args.output) write_npy(args.output, first[session.outputNames[0]]);
  const times = [];
  for (let i = 0; i < args.repeat; ++i) {
    const t = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  times.sort((a, b) => a - b);
  console.log(JSON.stringify({
    create_ms, first_run_ms, median_ms: percentile(times, 0.5), p90_ms: percentile(times, 0.9),
  }));
}

main().catch((e) => {
  console.error(`session.js: ${e.message}`);
  process.exit(1);
});

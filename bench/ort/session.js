// ONNX Runtime CPU (onnxruntime-node) side of Lumen's benchmarks.
//   node bench/ort/session.js MODEL.onnx [--threads 2] [--repeat N] [--shape NAME=1x3x224x224]
//        [--input NAME=FILE.npy] [--output FILE.npy]
// Creates a session (all graph optimizations, N intra-op threads), feeds the given .npy inputs or
// random inputs of the model's declared shape (symbolic dims taken from --shape, else 1), runs it,
// writes the first output to --output, and prints one JSON line:
// {"create_ms": ..., "first_run_ms": ..., "median_ms": ..., "p90_ms": ...}.
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

const kNpyTypes = {'<f4': ['float32', Float32Array], '<i8': ['int64', BigInt64Array]};

// Reads a little-endian float32 or int64 .npy file (C order) as an ort.Tensor.
function read_npy(path) {
  const buf = fs.readFileSync(path);
  const header_len = buf.readUInt16LE(8);
  const header = buf.toString('latin1', 10, 10 + header_len);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${path}: Fortran order`);
  const dims = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').filter((d) => d.trim())
      .map(Number);
  const entry = kNpyTypes[descr];
  if (!entry) throw new Error(`${path}: dtype ${descr} is not handled`);
  const [type, Array] = entry;
  const start = 10 + header_len;
  const data = new Array(buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + buf.length));
  return new ort.Tensor(type, data, dims);
}

// Writes a float32 ort.Tensor as a .npy file.
function write_npy(path, tensor) {
  if (tensor.type !== 'float32') throw new Error(`--output: type ${tensor.type} is not handled`);
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${tensor.dims.join(', ')}${
    tensor.dims.length === 1 ? ',' : ''}), }`;
  while ((10 + header.length + 1) % 64 !== 0) header += ' ';
  header += '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1;
  pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const body = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  fs.writeFileSync(path, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

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

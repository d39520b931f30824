// Little-endian .npy files (C order) as onnxruntime-node tensors: float32 and int64.
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

const kNpyTypes = {'<f4': ['float32', Float32Array], '<i8': ['int64', BigInt64Array]};
const kNpyDescr = {float32: '<f4', int64: '<i8'};

// Reads a float32 or int64 .npy file as an ort.Tensor.
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

// Writes a float32 or int64 ort.Tensor (or {type, data, dims}) as a .npy file.
function write_npy(path, tensor) {
  const descr = kNpyDescr[tensor.type];
  if (!descr) throw new Error(`${path}: type ${tensor.type} is not handled`);
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${tensor.dims.join(', ')}${
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

module.exports = {read_npy, write_npy};

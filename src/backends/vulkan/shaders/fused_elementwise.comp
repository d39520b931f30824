#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
// FusedElementwise (graph/fused_elementwise.h): each output element runs a straight-line program
// over float registers, registers 0 .. inputs-1 holding the inputs' elements (NumPy broadcasting,
// up to 8 inputs and 6 dims). The table (made once per kernel) holds, as int32 words: the output
// dims [6] (leading 1s), each input's element strides [8][6] (0 where broadcast), the
// instructions (code, dst, a, b) and the immediates as float bits. code < 100: apply_binary's
// op; else apply_unary's op code - 100, whose parameters are the immediates b names.
layout(local_size_x = 256) in;

layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Ints {
  int v[];
};

layout(push_constant) uniform P {
  uint64_t x[8];
  uint64_t y;
  uint64_t table;
  uint n;
  int inputs;
  int instructions;
  int consts;  // how many immediates
} p;

const int kProgram = 6 + 8 * 6;  // the first instruction's word

void main() {
  Ints t = Ints(p.table);
  Floats Y = Floats(p.y);
  const int consts_at = kProgram + 4 * p.instructions;
  uint stride = gl_NumWorkGroups.x * 256;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    int at[8];
    [[unroll]] for (int k = 0; k < 8; ++k) at[k] = 0;
    uint rest = i;
    for (int d = 5; d >= 0; --d) {
      const uint dim = uint(t.v[d]);
      const uint q = rest / dim, c = rest - q * dim;
      rest = q;
      [[unroll]] for (int k = 0; k < 8; ++k)
        if (k < p.inputs) at[k] += int(c) * t.v[6 + 6 * k + d];
    }
    float r[32];
    [[unroll]] for (int k = 0; k < 8; ++k)
      if (k < p.inputs) r[k] = float(Floats(p.x[k]).v[at[k]]);
    float v = 0.0;
    for (int c = 0; c < p.instructions; ++c) {
      const int w = kProgram + 4 * c;
      const int op = t.v[w], dst = t.v[w + 1], a = t.v[w + 2], b = t.v[w + 3];
      const float x = a >= 0 ? r[a] : intBitsToFloat(t.v[consts_at - a - 1]);
      if (op < 100) {
        const float z = b >= 0 ? r[b] : intBitsToFloat(t.v[consts_at - b - 1]);
        v = apply_binary(op, x, z);
      } else {
        // The parameters: the immediates from b on (unused where the op takes none).
        const int k0 = -b - 1;
        const float pa = b < 0 ? intBitsToFloat(t.v[consts_at + k0]) : 0.0;
        const float pb = b < 0 && k0 + 1 < p.consts ? intBitsToFloat(t.v[consts_at + k0 + 1]) : 0.0;
        v = apply_unary(op - 100, x, pa, pb);
      }
      r[dst] = v;
    }
    Y.v[i] = ELEM(v);
  }
}

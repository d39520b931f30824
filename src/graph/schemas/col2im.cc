// Schema of Col2Im (ONNX opset 18): column blocks [N, C * prod(block_shape), L] summed back into
// an image [N, C, image_shape...], with the strides, dilations and pads of a convolution. The
// image and block shapes are build-time inputs.
#include "graph/schemas/col2im.h"

#include <string>
#include <vector>

#include "graph/schema.h"

namespace lumen {
namespace {

std::string list_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// An ints attribute of `count` values each >= min_value, or `count` copies of `fallback`.
std::vector<int64_t> read_ints(const NodeContext& ctx, const char* name, size_t count,
                               int64_t fallback, int64_t min_value) {
  std::vector<int64_t> v = ctx.attr_ints(name, std::vector<int64_t>(count, fallback));
  if (v.size() != count)
    ctx.fail_model(std::string(name) + " has " + std::to_string(v.size()) + " values, expected " +
                   std::to_string(count));
  for (int64_t x : v)
    if (x < min_value)
      ctx.fail_model(std::string(name) + " " + list_string(v) +
                     " must be >= " + std::to_string(min_value));
  return v;
}

void infer_col2im(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (x.rank() != 3)
    ctx.fail_shape("input must be [N, C * prod(block_shape), L], got " + x.to_string());
  const Col2ImGeometry g = col2im_geometry(ctx);
  std::vector<int64_t> out = {x[0], g.channels};
  out.insert(out.end(), g.image.begin(), g.image.end());
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
}

}  // namespace

Col2ImGeometry col2im_geometry(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  for (int i = 1; i <= 2; ++i) {
    const char* what = i == 1 ? "image_shape" : "block_shape";
    if (ctx.input_dtype(i) != DType::kInt64)
      ctx.fail_shape(std::string(what) + " must be int64, got " + dtype_name(ctx.input_dtype(i)));
    if (ctx.input_shape(i).rank() != 1)
      ctx.fail_shape(std::string(what) + " must be a 1-D tensor, got " +
                     ctx.input_shape(i).to_string());
  }
  Col2ImGeometry g;
  g.image = ctx.input_ints(1, "image_shape");
  g.block = ctx.input_ints(2, "block_shape");
  const size_t n = g.image.size();
  if (n == 0 || g.block.size() != n)
    ctx.fail_shape("image_shape " + list_string(g.image) + " and block_shape " +
                   list_string(g.block) + " must have the same number (1 or more) of values");
  for (size_t i = 0; i < n; ++i)
    if (g.image[i] < 1 || g.block[i] < 1)
      ctx.fail_shape("image_shape " + list_string(g.image) + " and block_shape " +
                     list_string(g.block) + " must be positive");
  g.strides = read_ints(ctx, "strides", n, 1, 1);
  g.dilations = read_ints(ctx, "dilations", n, 1, 1);
  const std::vector<int64_t> pads = read_ints(ctx, "pads", 2 * n, 0, 0);
  g.pad_begin.assign(pads.begin(), pads.begin() + n);
  int64_t block_size = 1, blocks = 1;
  for (size_t i = 0; i < n; ++i) {
    const int64_t extent = g.dilations[i] * (g.block[i] - 1) + 1;
    const int64_t padded = g.image[i] + pads[i] + pads[i + n];
    if (padded < extent)
      ctx.fail_shape("the block (extent " + std::to_string(extent) + " along spatial axis " +
                     std::to_string(i) + ") is larger than the padded image (" +
                     std::to_string(padded) + ")");
    g.counts.push_back((padded - extent) / g.strides[i] + 1);
    block_size *= g.block[i];
    blocks *= g.counts.back();
  }
  if (x[1] % block_size != 0)
    ctx.fail_shape("input " + x.to_string() + ": dimension 1 is not a multiple of the block size " +
                   std::to_string(block_size) + " (block_shape " + list_string(g.block) + ")");
  if (x[2] != blocks)
    ctx.fail_shape("input " + x.to_string() + " has " + std::to_string(x[2]) + " blocks, but " +
                   std::to_string(blocks) + " " + list_string(g.counts) +
                   " fit the image with these strides, dilations and pads");
  g.channels = x[1] / block_size;
  return g;
}

LUMEN_REGISTER_SCHEMA(Col2Im, {.min_inputs = 3,
                               .max_inputs = 3,
                               .attrs = {{"dilations", AttrType::kInts},
                                         {"pads", AttrType::kInts},
                                         {"strides", AttrType::kInts}},
                               .infer = &infer_col2im});

}  // namespace lumen

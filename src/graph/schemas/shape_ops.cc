// Schemas of the shape ops: Identity, Reshape, Flatten, Squeeze, Unsqueeze, Concat, Split, Cast,
// Shape, ConstantOfShape and Range (ONNX opset 13-17 semantics, older attribute forms accepted).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "graph/onnx_dtype.h"
#include "graph/schema.h"
#include "graph/schemas/cast_attrs.h"
#include "graph/schemas/concat.h"

namespace lumen {

Shape concat_shape(const NodeContext& ctx, int first, int* axis) {
  for (int i = first; i < ctx.num_inputs(); ++i)
    if (!ctx.has_input(i)) ctx.fail_model("input " + std::to_string(i) + " is missing");
  const Shape& s0 = ctx.input_shape(first);
  const DType dtype = ctx.input_dtype(first);
  const int rank = s0.rank();
  if (rank == 0) ctx.fail_shape("cannot concatenate scalars");
  const int64_t a = ctx.attr_int("axis");
  if (a < -rank || a >= rank)
    ctx.fail_model("axis " + std::to_string(a) + " is out of range for rank " +
                   std::to_string(rank));
  *axis = static_cast<int>(a < 0 ? a + rank : a);
  Shape out = s0;
  out.dims()[*axis] = 0;
  for (int i = first; i < ctx.num_inputs(); ++i) {
    const Shape& s = ctx.input_shape(i);
    if (ctx.input_dtype(i) != dtype)
      ctx.fail_shape("input " + std::to_string(i) + " is " + dtype_name(ctx.input_dtype(i)) +
                     ", input " + std::to_string(first) + " is " + dtype_name(dtype));
    if (s.rank() != rank)
      ctx.fail_shape("input " + std::to_string(i) + " has shape " + s.to_string() +
                     ", of another rank than " + s0.to_string());
    for (int d = 0; d < rank; ++d)
      if (d != *axis && s.dims()[d] != s0.dims()[d])
        ctx.fail_shape("input " + std::to_string(i) + " has shape " + s.to_string() +
                       ", which differs from " + s0.to_string() + " outside axis " +
                       std::to_string(*axis));
    out.dims()[*axis] += s.dims()[*axis];
  }
  return out;
}

namespace {

std::string ints_to_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Wraps an axis attribute or axes input into [0, rank); out of range is a malformed model.
int wrap_axis(const InferContext& ctx, int64_t axis, int rank, const char* what) {
  if (axis < -rank || axis >= rank)
    ctx.fail_model(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
                   std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// Axes given either as input 1 (opset 13) or as the `axes` attribute (older opsets); *present says
// whether either was given.
std::vector<int64_t> read_axes(const InferContext& ctx, bool* present) {
  bool from_input = ctx.has_input(1);
  bool from_attr = ctx.has_attr("axes");
  if (from_input && from_attr) ctx.fail_model("axes are given both as an input and an attribute");
  *present = from_input || from_attr;
  if (from_input) return ctx.input_ints(1, "axes");
  if (from_attr) return ctx.attr_ints("axes");
  return {};
}

// Sorted, wrapped, duplicate-free axes.
std::vector<int> wrap_axes(const InferContext& ctx, const std::vector<int64_t>& axes, int rank) {
  std::vector<int> out;
  for (int64_t a : axes) out.push_back(wrap_axis(ctx, a, rank, "axis"));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    ctx.fail_model("axes " + ints_to_string(axes) + " repeat an axis");
  return out;
}

void infer_identity(InferContext& ctx) {
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
}

void infer_reshape(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  std::vector<int64_t> dims = ctx.input_ints(1, "shape");
  if (ctx.input_shape(1).rank() != 1)
    ctx.fail_shape("the shape input must be 1-D, got " + ctx.input_shape(1).to_string());
  int64_t allowzero = ctx.attr_int("allowzero", 0);
  if (allowzero != 0 && allowzero != 1)
    ctx.fail_model("allowzero must be 0 or 1, got " + std::to_string(allowzero));
  int infer = -1;
  bool has_zero = false;
  int64_t known = 1;
  for (int i = 0; i < static_cast<int>(dims.size()); ++i) {
    if (dims[i] == -1) {
      if (infer >= 0) ctx.fail_shape("shape " + ints_to_string(dims) + " has more than one -1");
      infer = i;
      continue;
    }
    if (dims[i] < -1) ctx.fail_shape("shape " + ints_to_string(dims) + " has a negative dimension");
    if (dims[i] == 0) {
      has_zero = true;
      if (!allowzero) {
        if (i >= in.rank())
          ctx.fail_shape("shape " + ints_to_string(dims) + " copies dimension " +
                         std::to_string(i) + " (a 0) of an input of rank " +
                         std::to_string(in.rank()));
        dims[i] = in.dims()[i];
      }
    }
    // Reshape's target cannot hold more elements than 64 bits count (fuzz finding 3).
    if (dims[i] != 0 && known > INT64_MAX / dims[i])
      ctx.fail_shape("shape " + ints_to_string(dims) + " has more elements than fit in 64 bits");
    known *= dims[i];
  }
  if (allowzero && has_zero && infer >= 0)
    ctx.fail_shape("with allowzero=1 the shape " + ints_to_string(dims) +
                   " may not hold both 0 and -1");
  int64_t total = in.numel();
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      ctx.fail_shape("cannot reshape " + in.to_string() + " to " + ints_to_string(dims));
    dims[infer] = total / known;
  }
  Shape out(dims);
  if (out.numel() != total)
    ctx.fail_shape("cannot reshape " + in.to_string() + " (" + std::to_string(total) +
                   " elements) to " + out.to_string());
  ctx.set_output(0, ctx.input_dtype(0), out);
}

void infer_flatten(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  int64_t axis = ctx.attr_int("axis", 1);
  if (axis < -in.rank() || axis > in.rank())
    ctx.fail_model("axis " + std::to_string(axis) + " is out of range for rank " +
                   std::to_string(in.rank()));
  if (axis < 0) axis += in.rank();
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < in.rank(); ++i) (i < axis ? outer : inner) *= in.dims()[i];
  ctx.set_output(0, ctx.input_dtype(0), Shape{outer, inner});
}

void infer_squeeze(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  bool present = false;
  std::vector<int64_t> axes = read_axes(ctx, &present);
  std::vector<bool> drop(in.rank(), false);
  // An empty axes list means "every size-1 axis", as ONNX Runtime reads it.
  if (present && !axes.empty()) {
    for (int a : wrap_axes(ctx, axes, in.rank())) {
      if (in.dims()[a] != 1)
        ctx.fail_shape("cannot squeeze axis " + std::to_string(a) + " of size " +
                       std::to_string(in.dims()[a]) + " in " + in.to_string());
      drop[a] = true;
    }
  } else {
    for (int i = 0; i < in.rank(); ++i) drop[i] = in.dims()[i] == 1;
  }
  std::vector<int64_t> out;
  for (int i = 0; i < in.rank(); ++i)
    if (!drop[i]) out.push_back(in.dims()[i]);
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
}

void infer_unsqueeze(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  bool present = false;
  std::vector<int64_t> axes = read_axes(ctx, &present);
  if (!present) ctx.fail_model("axes are required (as input 1 or the axes attribute)");
  int out_rank = in.rank() + static_cast<int>(axes.size());
  std::vector<bool> inserted(out_rank, false);
  for (int a : wrap_axes(ctx, axes, out_rank)) inserted[a] = true;
  std::vector<int64_t> out;
  int k = 0;
  for (int i = 0; i < out_rank; ++i) out.push_back(inserted[i] ? 1 : in.dims()[k++]);
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
}

void infer_concat(InferContext& ctx) {
  int first = -1;
  for (int i = 0; i < ctx.num_inputs() && first < 0; ++i)
    if (ctx.has_input(i)) first = i;
  if (first < 0) ctx.fail_model("needs at least one input");
  int axis = 0;
  const Shape out = concat_shape(ctx, first, &axis);
  ctx.set_output(0, ctx.input_dtype(first), out);
}

void infer_split(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  if (in.rank() == 0) ctx.fail_shape("cannot split a scalar");
  int axis = wrap_axis(ctx, ctx.attr_int("axis", 0), in.rank(), "axis");
  int n = ctx.num_outputs();
  int64_t dim = in.dims()[axis];
  bool split_input = ctx.has_input(1);
  std::vector<int64_t> sizes;
  if (split_input) sizes = ctx.input_ints(1, "split");
  // An empty split tensor is how some exporters say "no split"; treat it as absent.
  if (split_input && sizes.empty()) split_input = false;
  if (split_input && ctx.has_attr("split"))
    ctx.fail_model("split is given both as an input and an attribute");
  if (ctx.has_attr("split")) sizes = ctx.attr_ints("split");
  if (ctx.has_attr("num_outputs")) {
    int64_t num = ctx.attr_int("num_outputs");
    if (num != n)
      ctx.fail_model("num_outputs is " + std::to_string(num) + " but the node has " +
                     std::to_string(n) + " outputs");
    if (!sizes.empty()) ctx.fail_model("num_outputs and split may not both be given");
    // Opset 18: ceil(dim / n) per output, the last one smaller when it does not divide.
    int64_t chunk = (dim + n - 1) / n;
    for (int k = 0; k < n; ++k)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - chunk * k)));
    if (dim % n != 0 && chunk * (n - 1) >= dim)
      ctx.fail_shape("cannot split dimension " + std::to_string(dim) + " into " +
                     std::to_string(n) + " outputs");
  } else if (sizes.empty()) {
    if (dim % n != 0)
      ctx.fail_shape("cannot split dimension " + std::to_string(dim) + " of " + in.to_string() +
                     " into " + std::to_string(n) + " equal parts");
    sizes.assign(n, dim / n);
  }
  if (static_cast<int>(sizes.size()) != n)
    ctx.fail_model("split has " + std::to_string(sizes.size()) + " sizes but the node has " +
                   std::to_string(n) + " outputs");
  int64_t sum = 0;
  for (int64_t s : sizes) {
    if (s < 0) ctx.fail_shape("split " + ints_to_string(sizes) + " has a negative size");
    sum += s;
  }
  if (sum != dim)
    ctx.fail_shape("split " + ints_to_string(sizes) + " sums to " + std::to_string(sum) +
                   ", not to dimension " + std::to_string(axis) + " of " + in.to_string());
  for (int k = 0; k < n; ++k) {
    Shape out = in;
    out.dims()[axis] = sizes[k];
    ctx.set_output(k, ctx.input_dtype(0), out);
  }
}

void infer_cast(InferContext& ctx) {
  int64_t to = ctx.attr_int("to");
  std::optional<DType> dtype = dtype_from_onnx(to);
  if (!dtype) ctx.fail_unsupported("cannot cast to " + onnx_dtype_name(to));
  check_cast_attrs(ctx);
  ctx.set_output(0, *dtype, ctx.input_shape(0));
}

void infer_shape(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  int64_t rank = in.rank();
  auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  int64_t start = clamp(ctx.attr_int("start", 0));
  int64_t end = clamp(ctx.attr_int("end", rank));
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(in.dims()[i]);
  ctx.set_output_value(
      0, Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(dims.size())}, dims));
}

void infer_constant_of_shape(InferContext& ctx) {
  if (ctx.input_shape(0).rank() != 1)
    ctx.fail_shape("the shape input must be 1-D, got " + ctx.input_shape(0).to_string());
  if (ctx.input_dtype(0) != DType::kInt64)
    ctx.fail_shape(std::string("the shape input must be int64, got ") +
                   dtype_name(ctx.input_dtype(0)));
  std::vector<int64_t> dims = ctx.input_ints(0, "shape");
  for (int64_t d : dims)
    if (d < 0) ctx.fail_shape("shape " + ints_to_string(dims) + " has a negative dimension");
  DType dtype = DType::kFloat32;
  if (const Attribute* value = ctx.attr("value")) {
    const Tensor& t = value->as_tensor();
    if (!t.defined() || t.numel() != 1)
      ctx.fail_model("the value attribute must be a tensor of one element");
    dtype = t.dtype();
  }
  ctx.set_output(0, dtype, Shape(dims));
}

// The element count of Range over known inputs, per ONNX: max(ceil((limit - start) / delta), 0).
template <typename T>
int64_t range_count(const InferContext& ctx, T start, T limit, T delta) {
  if (delta == T(0)) ctx.fail_model("delta is 0");
  if constexpr (std::is_integral_v<T>) {
    // Exact integer ceil-division, in 128 bits so that no difference overflows.
    __int128 diff = static_cast<__int128>(limit) - start;
    if ((diff > 0) != (delta > 0) || diff == 0) return 0;
    __int128 d = delta;
    __int128 n = (diff + d + (d > 0 ? -1 : 1)) / d;
    if (n > std::numeric_limits<int64_t>::max()) ctx.fail_shape("the range is too long");
    return static_cast<int64_t>(n);
  } else {
    double n = std::ceil(static_cast<double>(limit - start) / static_cast<double>(delta));
    if (std::isnan(n)) ctx.fail_shape("start, limit and delta give no element count (NaN)");
    if (n <= 0) return 0;
    if (n > 9.0e18) ctx.fail_shape("the range is too long");
    return static_cast<int64_t>(n);
  }
}

void infer_range(InferContext& ctx) {
  DType dtype = ctx.input_dtype(0);
  const char* names[] = {"start", "limit", "delta"};
  const Tensor* v[3];
  for (int i = 0; i < 3; ++i) {
    if (ctx.input_dtype(i) != dtype)
      ctx.fail_shape(std::string(names[i]) + " is " + dtype_name(ctx.input_dtype(i)) +
                     ", start is " + dtype_name(dtype));
    if (ctx.input_shape(i).numel() != 1 || ctx.input_shape(i).rank() > 1)
      ctx.fail_shape(std::string(names[i]) + " must be a scalar, got shape " +
                     ctx.input_shape(i).to_string());
    v[i] = ctx.input_value(i);
    if (v[i] == nullptr)
      ctx.fail_shape(std::string("the ") + names[i] +
                     " input must be known when the graph is built (the output length depends "
                     "on it)");
  }
  int64_t n = 0;
  switch (dtype) {
    case DType::kFloat32:
      n = range_count(ctx, v[0]->data<float>()[0], v[1]->data<float>()[0], v[2]->data<float>()[0]);
      break;
    case DType::kFloat64:
      n = range_count(ctx, v[0]->data<double>()[0], v[1]->data<double>()[0],
                      v[2]->data<double>()[0]);
      break;
    case DType::kInt32:
      n = range_count(ctx, v[0]->data<int32_t>()[0], v[1]->data<int32_t>()[0],
                      v[2]->data<int32_t>()[0]);
      break;
    case DType::kInt64:
      n = range_count(ctx, v[0]->data<int64_t>()[0], v[1]->data<int64_t>()[0],
                      v[2]->data<int64_t>()[0]);
      break;
    default:
      ctx.fail_shape(std::string("Range takes float32, float64, int32 or int64, not ") +
                     dtype_name(dtype));
  }
  ctx.set_output(0, dtype, Shape{n});
}

}  // namespace

LUMEN_REGISTER_SCHEMA(Identity, {.attrs = {}, .infer = &infer_identity});
LUMEN_REGISTER_SCHEMA(Reshape, {.min_inputs = 2,
                                .max_inputs = 2,
                                .attrs = {{"allowzero", AttrType::kInt}},
                                .infer = &infer_reshape});
LUMEN_REGISTER_SCHEMA(Flatten, {.attrs = {{"axis", AttrType::kInt}}, .infer = &infer_flatten});
LUMEN_REGISTER_SCHEMA(Squeeze, {.min_inputs = 1,
                                .max_inputs = 2,
                                .attrs = {{"axes", AttrType::kInts}},
                                .infer = &infer_squeeze});
LUMEN_REGISTER_SCHEMA(Unsqueeze, {.min_inputs = 1,
                                  .max_inputs = 2,
                                  .attrs = {{"axes", AttrType::kInts}},
                                  .infer = &infer_unsqueeze});
LUMEN_REGISTER_SCHEMA(Concat, {.min_inputs = 1,
                               .max_inputs = kVariadic,
                               .attrs = {{"axis", AttrType::kInt, true}},
                               .infer = &infer_concat});
LUMEN_REGISTER_SCHEMA(Split, {.min_inputs = 1,
                              .max_inputs = 2,
                              .min_outputs = 1,
                              .max_outputs = kVariadic,
                              .attrs = {{"axis", AttrType::kInt},
                                        {"split", AttrType::kInts},
                                        {"num_outputs", AttrType::kInt}},
                              .infer = &infer_split});
// `saturate` (opset 19) and `round_mode` (opset 24) change casts to the float8 types;
// `fnuz_inf_to_nan` is lumen's, set by the importer for opsets 19-23 (see cast_attrs.h).
LUMEN_REGISTER_SCHEMA(Cast, {.attrs = {{"to", AttrType::kInt, true},
                                       {"saturate", AttrType::kInt},
                                       {"round_mode", AttrType::kString},
                                       {"fnuz_inf_to_nan", AttrType::kInt}},
                             .infer = &infer_cast});
LUMEN_REGISTER_SCHEMA(Shape, {.attrs = {{"start", AttrType::kInt}, {"end", AttrType::kInt}},
                              .infer = &infer_shape});
LUMEN_REGISTER_SCHEMA(ConstantOfShape,
                      {.attrs = {{"value", AttrType::kTensor}}, .infer = &infer_constant_of_shape});
LUMEN_REGISTER_SCHEMA(Range,
                      {.min_inputs = 3, .max_inputs = 3, .attrs = {}, .infer = &infer_range});

}  // namespace lumen

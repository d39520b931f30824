// Which graph inputs decide shapes by their values: Reshape's shape, Slice's starts, Reduce axes,
// TopK's K, Range's bounds, ... fed as graph inputs, or computed from graph inputs. Lumen compiles
// for known shapes, so OnnxSession reads these inputs' values at each run and keys its plans by
// them (as it keys them by input shapes).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace lumen::onnx_import {

// The input slots of `op_type` (default domain, at `opset`) whose values decide an output's shape
// or another compile-time property; empty for most ops.
std::vector<int> shape_deciding_slots(const std::string& op_type, int64_t opset);

// The main graph's inputs (not initializers) whose values reach a shape-deciding slot of any node,
// in the main graph or a nested subgraph, through any chain of nodes. Shape and Size end a chain
// (they read only their input's shape, which plans are already keyed by), as do SequenceLength and
// OptionalHasElement. The condition of an If that gives a sequence or optional, and the trip count
// and condition of a Loop that carries one, count as shape-deciding (the importer resolves those
// when the graph is built). Sequence and optional inputs are never listed (plans are keyed by
// their lengths and presence). In graph input order.
std::vector<std::string> find_value_inputs(const onnx::ModelProto& model, int64_t opset);

}  // namespace lumen::onnx_import

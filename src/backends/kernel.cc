// AnyShapeScope: the thread's mark that kernels are built for a plan of many sizes.
#include "backends/kernel.h"

namespace lumen {
namespace {

thread_local int any_shape_depth = 0;

}  // namespace

AnyShapeScope::AnyShapeScope() {
  ++any_shape_depth;
}
AnyShapeScope::~AnyShapeScope() {
  --any_shape_depth;
}

bool building_for_any_shape() {
  return any_shape_depth > 0;
}

}  // namespace lumen

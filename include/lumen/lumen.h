// Lumen's public C++ API.
#pragma once

#include "lumen/allocator.h"
#include "lumen/attribute.h"
#include "lumen/device.h"
#include "lumen/dtype.h"
#include "lumen/error.h"
#include "lumen/generate.h"
#include "lumen/graph.h"
#include "lumen/memory_limit.h"
#include "lumen/npy.h"
#include "lumen/onnx.h"
#include "lumen/router.h"
#include "lumen/runtime.h"
#include "lumen/shape.h"
#include "lumen/tensor.h"
#include "lumen/threads.h"

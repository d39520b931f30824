// RecordingStream: a stream whose work can be recorded once and replayed as a whole (CUDA graphs),
// and that enqueues copies between tensors. A backend's stream implements it besides Stream.
#pragma once

#include <memory>

#include "lumen/tensor.h"

namespace lumen {

// Work recorded from a stream that can be enqueued again as a whole.
class CapturedWork {
 public:
  virtual ~CapturedWork() = default;
  // Enqueues the recorded work once more, on the stream it was recorded from.
  virtual void replay() = 0;
};

class RecordingStream {
 public:
  virtual ~RecordingStream() = default;
  // Starts recording: work enqueued on the stream from now on is recorded instead of run.
  virtual void begin_capture() = 0;
  // Stops recording and returns the recorded work, ready to replay.
  virtual std::unique_ptr<CapturedWork> end_capture() = 0;
  // Enqueues a copy of src into dst (the same byte size; either may be on the host). A copy to the
  // host is complete when this returns; a copy from the host has read src when this returns (src
  // may change at once), and dst is ready for work enqueued on this stream after it.
  virtual void copy(const Tensor& src, const Tensor& dst) = 0;
};

}  // namespace lumen

// Stream and Event: ordered queues of device work and markers in them. The CPU stream runs work
// as it is enqueued; the CUDA backend implements the same interface over cudaStream_t.
#pragma once

#include <memory>

#include "lumen/device.h"

namespace lumen {

class Event;

class Stream {
 public:
  virtual ~Stream() = default;
  virtual Device device() const = 0;
  // Blocks the host until everything enqueued so far has finished.
  virtual void synchronize() = 0;
  // Makes later work on this stream wait for `event`.
  virtual void wait(const Event& event) = 0;
  virtual std::unique_ptr<Event> create_event() = 0;
  // An event that also takes the device's clock when the stream reaches it, so the device time
  // between two of them can be read (Event::elapsed_us); null where the stream cannot (the host,
  // a device without timestamps), and profiling then times its steps on the host.
  virtual std::unique_ptr<Event> create_timing_event() { return nullptr; }
};

class Event {
 public:
  virtual ~Event() = default;
  // Marks the point in `stream` reached by the work enqueued so far.
  virtual void record(Stream& stream) = 0;
  // Blocks the host until the marked work has finished.
  virtual void synchronize() = 0;
  virtual bool done() const = 0;
  // Microseconds of device time from this event to `later`, both timing events of one stream
  // (Stream::create_timing_event) recorded in that order; waits for `later`. DeviceError for
  // events that do not time.
  virtual double elapsed_us(const Event& later) const;
};

// The host stream: work runs synchronously on the calling thread, so every event is done at once.
class CpuStream final : public Stream {
 public:
  Device device() const override { return Device::cpu(); }
  void synchronize() override {}
  void wait(const Event&) override {}
  std::unique_ptr<Event> create_event() override;
};

}  // namespace lumen

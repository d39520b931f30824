// derived_tensor: a process-wide table of weak references, keyed by the source (its buffer, offset,
// dtype and shape: two views of one buffer are two sources) and the derivation's name, purged of
// dead entries as it grows.
#include "core/derived_tensors.h"

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace lumen {
namespace {

struct Entry {
  std::weak_ptr<Buffer> source;
  std::weak_ptr<Buffer> derived;
  size_t offset = 0;  // of the derived tensor in its buffer
  Shape shape;
  DType dtype = DType::kFloat32;
};

using Key = std::tuple<const Buffer*, size_t, std::string>;

struct Table {
  std::mutex mutex;
  std::map<Key, Entry> entries;
  size_t purge_at = 64;  // purge dead entries when the table reaches this size
};

Table& table() {
  static Table* t = new Table();  // never destroyed: kernels may outlive static destruction
  return *t;
}

// The entry's tensor when its source is `source` and both are alive; undefined otherwise.
Tensor alive(const Entry& e, const std::shared_ptr<Buffer>& source) {
  std::shared_ptr<Buffer> s = e.source.lock();
  if (s == nullptr || s != source) return Tensor();
  std::shared_ptr<Buffer> d = e.derived.lock();
  if (d == nullptr) return Tensor();
  return Tensor(std::move(d), e.offset, e.shape, e.dtype);
}

}  // namespace

Tensor derived_tensor(const Tensor& source, const std::string& how,
                      const std::function<Tensor()>& make) {
  if (!source.defined()) return make();
  Key key{source.buffer().get(), source.offset(),
          std::string(dtype_name(source.dtype())) + source.shape().to_string() + " " + how};
  Table& t = table();
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    auto it = t.entries.find(key);
    if (it != t.entries.end()) {
      Tensor hit = alive(it->second, source.buffer());
      if (hit.defined()) return hit;
    }
  }
  Tensor made = make();
  if (!made.defined()) return made;
  std::lock_guard<std::mutex> lock(t.mutex);
  // Another thread may have made it meanwhile: keep the first, so both share it.
  auto it = t.entries.find(key);
  if (it != t.entries.end()) {
    Tensor hit = alive(it->second, source.buffer());
    if (hit.defined()) return hit;
  }
  t.entries[key] = Entry{source.buffer(), made.buffer(), made.offset(), made.shape(), made.dtype()};
  if (t.entries.size() >= t.purge_at) {
    for (auto e = t.entries.begin(); e != t.entries.end();)
      e = e->second.source.expired() || e->second.derived.expired() ? t.entries.erase(e) : ++e;
    t.purge_at = std::max<size_t>(64, 2 * t.entries.size());
  }
  return made;
}

size_t num_derived_tensors() {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  size_t n = 0;
  for (const auto& [key, e] : t.entries) n += !e.source.expired() && !e.derived.expired();
  return n;
}

}  // namespace lumen

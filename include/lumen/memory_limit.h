// The host memory limit: how much tensor memory Lumen may hold at once on the host.
#pragma once

#include <cstddef>

namespace lumen {

// The most bytes the host pool hands out at once (bytes in use; cached blocks not counted). A
// request that would go past it throws OutOfMemory before any memory is asked of the system, so a
// model whose tensors would need more than the machine has fails cleanly instead of being killed.
// The default is the machine's physical memory; servers running untrusted models set less.
void set_host_memory_limit(size_t bytes);
// The limit now in force, in bytes.
size_t host_memory_limit();

}  // namespace lumen

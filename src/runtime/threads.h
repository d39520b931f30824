// The thread setting of lumen/threads.h, applied where work starts.
#pragma once

namespace lumen {

// Makes the calling thread's OpenMP teams the size set_num_threads() chose (OpenMP keeps the team
// size per thread, so every compile and run applies it on the thread that makes it). Cheap.
void apply_num_threads();

}  // namespace lumen

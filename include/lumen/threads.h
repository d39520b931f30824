// How many CPU threads Lumen uses: its own kernels' OpenMP teams and oneDNN's.
#pragma once

namespace lumen {

// Sets the number of CPU threads every later compile and run uses, whichever thread makes them
// (ONNX Runtime's intra-op threads); 0 restores the default, OpenMP's (the machine's cores, or
// OMP_NUM_THREADS). Process-wide. Until it is first called, each thread's own OpenMP setting
// stands. Throws InvalidArgument naming the value when n < 0.
void set_num_threads(int n);

// The number of CPU threads a compile or run started now uses.
int num_threads();

}  // namespace lumen

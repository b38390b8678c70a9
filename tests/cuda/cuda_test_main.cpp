// Catch2's main for the GPU tests: exits 77 (meson's "skipped") when this machine has no usable CUDA device, so the
// suite passes on CPU-only machines without pretending the GPU paths were tested.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "transports/cuda_ipc/cuda_check.hpp"

int main(int argc, char** argv) {
  if (dcomm::cuda::device_count() == 0) {
    std::puts("no CUDA device (cudaGetDeviceCount failed or found none): skipping");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}

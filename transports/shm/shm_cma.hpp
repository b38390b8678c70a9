#pragma once
// Cross-memory attach: the receiver copies a large message straight from the sender's memory with
// process_vm_readv, one copy in all. The kernel allows it only where the receiver may ptrace the sender
// (same user; Yama's ptrace_scope 0, or 1 with a ptracer grant), so connect() probes it once per peer and
// falls back to streaming through the ring where it fails.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace dcomm::transport::shm {

/// Reads `bytes` from `addr` in process `pid` into `dst`, looping over partial reads. Returns 0 or an errno.
int cma_read(pid_t pid, void* dst, uint64_t addr, uint64_t bytes);

/// Writes `bytes` from `src` to `addr` in process `pid` (process_vm_writev), looping over partial writes.
/// Returns 0 or an errno.
int cma_write(pid_t pid, uint64_t addr, const void* src, uint64_t bytes);

/// Whether this process can read `pid`'s memory: reads the 8 bytes at `addr` and compares them with `expect`.
/// Returns 0 when it works, else the errno (EPERM, ESRCH, ...) or EFAULT for a wrong value.
int cma_probe(pid_t pid, uint64_t addr, uint64_t expect);

/// An address in this process that holds a fixed value, for peers' probes.
uint64_t cma_probe_address();
uint64_t cma_probe_value();

}  // namespace dcomm::transport::shm

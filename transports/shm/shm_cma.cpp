#include "transports/shm/shm_cma.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

namespace dcomm::transport::shm {
namespace {

// One read asks for at most this much; the kernel may return less anyway (it caps a call near 2 GiB).
constexpr uint64_t kMaxCmaPiece = uint64_t{1} << 30;
constexpr uint64_t kProbeValue = 0x5eed0fdc0117a11full;
volatile uint64_t g_probe = kProbeValue;

// One loop for both directions: `local_buf` is the buffer in this process, `addr` the one in `pid`.
int cma_move(pid_t pid, char* local_buf, uint64_t addr, uint64_t bytes, bool write) {
  uint64_t done = 0;
  while (done < bytes) {
    uint64_t piece = std::min(bytes - done, kMaxCmaPiece);
    iovec local{local_buf + done, piece};
    iovec remote{reinterpret_cast<void*>(addr + done), piece};
    ssize_t n = write ? ::process_vm_writev(pid, &local, 1, &remote, 1, 0)
                      : ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EFAULT;
    done += static_cast<uint64_t>(n);
  }
  return 0;
}

}  // namespace

int cma_read(pid_t pid, void* dst, uint64_t addr, uint64_t bytes) {
  return cma_move(pid, static_cast<char*>(dst), addr, bytes, false);
}

int cma_write(pid_t pid, uint64_t addr, const void* src, uint64_t bytes) {
  // process_vm_writev takes a non-const local iovec but only reads from it.
  return cma_move(pid, const_cast<char*>(static_cast<const char*>(src)), addr, bytes, true);
}

int cma_probe(pid_t pid, uint64_t addr, uint64_t expect) {
  uint64_t got = 0;
  int err = cma_read(pid, &got, addr, sizeof(got));
  if (err != 0) return err;
  return got == expect ? 0 : EFAULT;
}

uint64_t cma_probe_address() { return reinterpret_cast<uint64_t>(&g_probe); }
uint64_t cma_probe_value() { return g_probe; }

}  // namespace dcomm::transport::shm

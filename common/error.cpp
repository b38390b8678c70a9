#include <dcomm/error.hpp>

#include <cstring>

namespace dcomm {

const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kInvalidUsage: return "InvalidUsage";
    case ErrorCode::kTimeout: return "Timeout";
    case ErrorCode::kRemoteError: return "RemoteError";
    case ErrorCode::kAborted: return "Aborted";
    case ErrorCode::kSystemError: return "SystemError";
    case ErrorCode::kCudaError: return "CudaError";
    case ErrorCode::kInternal: return "Internal";
  }
  return "Unknown";
}

SystemError::SystemError(const std::string& what, int err)
    : Error(ErrorCode::kSystemError, what + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")"),
      errno_(err) {}

}  // namespace dcomm

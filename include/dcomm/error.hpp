#pragma once
/// dcomm's one error type. Every failure dcomm reports is a dcomm::Error carrying an ErrorCode and a message
/// that names the operation, the rank, the peer, the transport, the bytes, the elapsed time and the timeout
/// where they apply, and says what to check next.

#include <stdexcept>
#include <string>

namespace dcomm {

/// What kind of failure an Error reports.
enum class ErrorCode {
  kInvalidUsage,  ///< the caller's mistake: bad argument, bad root, null buffer, mismatched calls
  kTimeout,       ///< a bounded wait ran out
  kRemoteError,   ///< a peer died, disconnected or reported a failure
  kAborted,       ///< the operation or group was aborted
  kSystemError,   ///< an OS call failed (errno is in the message)
  kCudaError,     ///< a CUDA call failed (the CUDA error name is in the message)
  kInternal,      ///< a broken invariant inside dcomm: a bug, please report it
};

/// The name of an ErrorCode, e.g. "Timeout".
const char* to_string(ErrorCode code) noexcept;

/// The base of every exception dcomm throws.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

/// A bounded wait ran out (a store get, a receive, a collective).
class TimeoutError : public Error {
 public:
  explicit TimeoutError(const std::string& message) : Error(ErrorCode::kTimeout, message) {}
};

/// A caller mistake, detected before any data moves; in a collective, raised on every rank of the group.
class InvalidUsageError : public Error {
 public:
  explicit InvalidUsageError(const std::string& message) : Error(ErrorCode::kInvalidUsage, message) {}
};

/// A peer failed: it died, disconnected, or its half of the operation failed.
class RemoteError : public Error {
 public:
  explicit RemoteError(const std::string& message) : Error(ErrorCode::kRemoteError, message) {}
};

/// The operation or its group was aborted.
class AbortedError : public Error {
 public:
  explicit AbortedError(const std::string& message) : Error(ErrorCode::kAborted, message) {}
};

/// This rank was left out of a shrink (ProcessGroup::shrink): the survivors agreed without it (it was stopped or
/// too slow to join in time). It is no longer part of the job: it should exit. Code kAborted.
class ExcludedError : public AbortedError {
 public:
  explicit ExcludedError(const std::string& message) : AbortedError(message) {}
};

/// An operating-system call failed.
class SystemError : public Error {
 public:
  SystemError(const std::string& what, int err);
  int error_number() const noexcept { return errno_; }

 private:
  int errno_;
};

}  // namespace dcomm

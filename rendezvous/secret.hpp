#pragma once
// The TCP store's shared secret: a client proves it belongs to the job by presenting the same secret as the
// server in its hello frame. It keeps a stray or malicious process on the network from reading or forging keys;
// it is not encryption (the traffic itself is plain). See docs/store.md, "Threat model".

#include <string>

namespace dcomm::rdzv {

/// The secret to use: the one given, else DCOMM_STORE_SECRET, else the contents of the file DCOMM_STORE_SECRET_FILE
/// names (one trailing newline dropped; the file must not be readable by group or others), else none (empty).
/// Throws InvalidUsageError naming the variable or file when the file cannot be used.
std::string resolve_secret(const std::string& given);

/// Whether an unauthenticated store beyond loopback was chosen explicitly: DCOMM_STORE_INSECURE=1.
bool insecure_chosen();

/// A fresh random secret (32 bytes from the kernel's generator, as 64 hex digits).
std::string generate_secret();

/// How to give a store its secret, for error messages.
inline constexpr const char* kSecretHowTo =
    "give every process of the job the same secret: DCOMM_STORE_SECRET=<random string> in the environment (e.g. "
    "`export DCOMM_STORE_SECRET=$(head -c 32 /dev/urandom | base64)` before mpirun -x DCOMM_STORE_SECRET or srun), or "
    "DCOMM_STORE_SECRET_FILE=<a file only you can read>; or, to run without one, DCOMM_STORE_INSECURE=1";

/// Compares in time that depends only on the lengths, so a client cannot find the secret byte by byte by timing.
bool secrets_equal(const std::string& a, const std::string& b) noexcept;

}  // namespace dcomm::rdzv

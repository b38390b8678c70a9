#pragma once
// Snapshots of a training run: the model's weights, the optimizer's state, the step and the data sampler's RNG
// state, everything a restarted run needs to continue exactly where the snapshot was taken.
//
// File format (native byte order): "DCOMMCK1", the payload written with ByteWriter, then the FNV-1a 64 of all
// bytes before it. A file is written under a temporary name, fsync'ed, renamed to `step-<step>.ckpt` and the
// directory fsync'ed, so a crash at any moment leaves either the previous snapshot or the new one, never a torn
// file; the checksum catches what the file system could still get wrong.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rng.hpp"

namespace examples {

struct Snapshot {
  int64_t step = 0;  ///< optimizer steps completed
  Rng::State rng{};
  std::vector<int32_t> widths;  ///< the model's shape, checked on resume
  std::string optimizer;        ///< the optimizer's name, checked on resume
  std::vector<float> params;
  std::vector<uint8_t> optimizer_state;
};

std::vector<uint8_t> encode_snapshot(const Snapshot& s);
/// Throws std::runtime_error naming `origin` when the bytes are not a valid snapshot.
Snapshot decode_snapshot(const std::vector<uint8_t>& bytes, const std::string& origin);

/// Writes `bytes` as dir/step-<step>.ckpt atomically (temp file, fsync, rename, fsync dir), creating dir if
/// needed, and deletes older snapshots beyond the newest `keep`. Returns the path. Throws std::runtime_error
/// naming the path and errno on failure.
std::string write_snapshot_file(const std::string& dir, int64_t step, const std::vector<uint8_t>& bytes, int keep = 2);

/// The newest valid snapshot in dir (newest step first; unreadable or corrupt files are skipped with a message on
/// stderr), or nothing when there is none.
struct SnapshotFile {
  std::string path;
  std::vector<uint8_t> bytes;
};
std::optional<SnapshotFile> find_latest_snapshot(const std::string& dir);

}  // namespace examples

#include "transports/staging/pipelines.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <dcomm/error.hpp>

namespace dcomm::transport::staging {
namespace {

std::vector<std::unique_ptr<Slot>> make_slots(Stager& stager, const Device& device, std::size_t chunks) {
  const std::size_t n = std::min<std::size_t>(chunks, static_cast<std::size_t>(std::max(1, stager.depth())));
  std::vector<std::unique_ptr<Slot>> slots;
  for (std::size_t i = 0; i < n; ++i) slots.push_back(stager.slot(device));
  return slots;
}

std::size_t checked_chunk(const Stager& stager) {
  if (stager.chunk_bytes() == 0) throw InvalidUsageError("staging: the stager's chunk size must be at least 1 byte");
  return stager.chunk_bytes();
}

}  // namespace

// ---- Download

Download::Download(Stager& stager, const Device& device, const void* src, std::size_t bytes)
    : src_(static_cast<const char*>(src)),
      bytes_(bytes),
      chunk_(checked_chunk(stager)),
      chunks_(chunk_count(bytes, chunk_)),
      slots_(make_slots(stager, device, chunks_)),
      busy_(slots_.size(), false) {
  start_copies();
}

void Download::start_copies() {
  // Chunk k goes into slot k % depth once that slot's previous chunk (k - depth) has been sent.
  while (next_copy_ < chunks_ && !busy_[next_copy_ % slots_.size()]) {
    const std::size_t s = next_copy_ % slots_.size();
    slots_[s]->to_host(src_ + next_copy_ * chunk_, chunk_size(next_copy_, bytes_, chunk_));
    busy_[s] = true;
    ++next_copy_;
  }
}

bool Download::ready(HostChunk* out) {
  if (next_ready_ >= next_copy_) return false;
  Slot& s = *slots_[next_ready_ % slots_.size()];
  if (!s.idle()) return false;
  *out = HostChunk{next_ready_, s.host(), chunk_size(next_ready_, bytes_, chunk_)};
  ++next_ready_;
  return true;
}

void Download::sent(std::size_t index) {
  const std::size_t s = index % std::max<std::size_t>(1, slots_.size());
  if (index >= next_ready_ || slots_.empty() || !busy_[s]) {
    throw Error(ErrorCode::kInternal, fmt::format("staging: chunk {} reported sent but it was never handed out",
                                                  index));
  }
  busy_[s] = false;
  ++sent_;
  start_copies();
}

// ---- Upload

Upload::Upload(Stager& stager, const Device& device, void* dst, std::size_t bytes)
    : dst_(static_cast<char*>(dst)),
      bytes_(bytes),
      chunk_(checked_chunk(stager)),
      chunks_(chunk_count(bytes, chunk_)),
      slots_(make_slots(stager, device, chunks_)),
      held_(slots_.size(), false) {}

void* Upload::lend(std::size_t index) {
  if (index != lent_ || index >= chunks_) {
    throw Error(ErrorCode::kInternal, fmt::format("staging: chunk {} asked for out of order (next is {} of {})",
                                                  index, lent_, chunks_));
  }
  const std::size_t s = index % slots_.size();
  // The slot's previous chunk must be filled and its copy to the device finished before it is reused.
  if (held_[s] || !slots_[s]->idle()) return nullptr;
  held_[s] = true;
  ++lent_;
  return slots_[s]->host();
}

void Upload::filled(std::size_t index) {
  const std::size_t s = index % std::max<std::size_t>(1, slots_.size());
  if (index >= lent_ || slots_.empty() || !held_[s]) {
    throw Error(ErrorCode::kInternal, fmt::format("staging: chunk {} reported received but it was never lent",
                                                  index));
  }
  slots_[s]->to_device(dst_ + index * chunk_, chunk_size(index, bytes_, chunk_));
  held_[s] = false;
  ++filled_;
}

bool Upload::done() {
  if (filled_ != chunks_) return false;
  for (auto& s : slots_) {
    if (!s->idle()) return false;
  }
  return true;
}

}  // namespace dcomm::transport::staging

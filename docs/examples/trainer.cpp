#include "trainer.hpp"

#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "checkpoint.hpp"

namespace examples {

namespace {

// The data set and the initial weights draw from streams derived from the one --seed, so that changing one
// knob (say the data set size) does not silently change the other.
constexpr uint64_t kDataStream = 0x1000;
constexpr uint64_t kModelStream = 0x2000;
constexpr uint64_t kSamplerStream = 0x3000;

GradSync::Options sync_options(const TrainOptions& o, bool bucketing) {
  GradSync::Options s;
  s.bucketing = bucketing;
  s.bucket_bytes = o.bucket_bytes;
  s.algorithm = o.algorithm;
  return s;
}

}  // namespace

Trainer::Trainer(dcomm::ProcessGroup& group, const TrainOptions& options)
    : group_(&group),
      options_(options),
      global_batch_(static_cast<std::size_t>(options.batch) * static_cast<std::size_t>(group.size())),
      data_(make_teacher_dataset(options.samples, options.dim, options.classes, options.seed ^ kDataStream)),
      model_(options.widths(), options.seed ^ kModelStream),
      optimizer_(make_optimizer(options.optimizer, model_.param_count())),
      sampler_(options.seed ^ kSamplerStream),
      grad_(model_.param_count()),
      bucketed_(std::make_unique<GradSync>(group, model_.tensors(), grad_, sync_options(options, true))),
      per_tensor_(std::make_unique<GradSync>(group, model_.tensors(), grad_, sync_options(options, false))) {}

void Trainer::rebind(dcomm::ProcessGroup& group) {
  group_ = &group;
  bucketed_ = std::make_unique<GradSync>(group, model_.tensors(), grad_, sync_options(options_, true));
  per_tensor_ = std::make_unique<GradSync>(group, model_.tensors(), grad_, sync_options(options_, false));
}

void Trainer::remember() {
  saved_.params = model_.params();
  saved_.optimizer = optimizer_state();
  saved_.rng = sampler_.state();
  saved_.steps_done = steps_done_;
}

void Trainer::restore_previous() {
  model_.params() = saved_.params;
  ByteReader r(saved_.optimizer.data(), saved_.optimizer.size());
  optimizer_->load(r);
  sampler_.set_state(saved_.rng);
  steps_done_ = saved_.steps_done;
}

double Trainer::step(bool bucketing) {
  // Every rank draws the same global batch and keeps its own slice: rank r of n gets samples [r*G/n, (r+1)*G/n).
  // G stays the starting group's, so after a shrink the survivors train on the very batches an uninterrupted run
  // would (re-sharded: slices differ by at most one sample when n does not divide G).
  const std::size_t n = static_cast<std::size_t>(group_->size()), r = static_cast<std::size_t>(group_->rank());
  const std::vector<uint32_t> global = draw_indices(sampler_, data_.size(), global_batch_);
  const std::size_t lo = r * global_batch_ / n, hi = (r + 1) * global_batch_ / n;
  const std::span<const uint32_t> mine(global.data() + lo, hi - lo);

  GradSync& sync = bucketing ? *bucketed_ : *per_tensor_;
  sync.begin();
  double loss = model_.forward_backward(data_, mine, grad_, [&sync](std::size_t t) { sync.on_ready(t); });
  sync.finish();
  optimizer_->step(model_.params(), grad_);
  ++steps_done_;

  group_->all_reduce(dcomm::Buffer(&loss, 1), dcomm::Reduction{dcomm::ReduceOp::kAvg});
  return loss;
}

void Trainer::corrupt_weights() {
  uint32_t bits;
  std::memcpy(&bits, model_.params().data(), sizeof(bits));
  bits ^= 1u;
  std::memcpy(model_.params().data(), &bits, sizeof(bits));
}

std::vector<uint8_t> Trainer::optimizer_state() const {
  ByteWriter w;
  optimizer_->save(w);
  return std::move(w.bytes());
}

uint64_t Trainer::fingerprint() const {
  const std::vector<float>& p = model_.params();
  uint64_t h = fnv1a64(p.data(), p.size() * sizeof(float));
  const std::vector<uint8_t> opt = optimizer_state();
  h = fnv1a64(opt.data(), opt.size(), h);
  return fnv1a64(sampler_.state().data(), sizeof(Rng::State), h);
}

void Trainer::check_replicas_identical() {
  // max over ranks of {h, ~h} is {max h, ~min h}: one all_reduce gives both extremes.
  const uint64_t h = fingerprint();
  uint64_t both[2] = {h, ~h};
  group_->all_reduce(dcomm::Buffer(both, 2), dcomm::Reduction{dcomm::ReduceOp::kMax});
  const uint64_t max_h = both[0], min_h = ~both[1];
  if (max_h != min_h) {
    char msg[512];
    std::snprintf(
        msg, sizeof(msg),
        "replicas diverged after step %lld: rank %d/%d holds weights hash %016llx, the ranks' hashes range "
        "from %016llx to %016llx; check that the gradient all_reduce gives every rank the same bits (try --algo "
        "ring) and that no rank changes its weights on its own",
        static_cast<long long>(steps_done_), group_->rank(), group_->size(), static_cast<unsigned long long>(h),
        static_cast<unsigned long long>(min_h), static_cast<unsigned long long>(max_h));
    throw std::runtime_error(msg);
  }
}

std::string Trainer::save_snapshot() {
  if (group_->rank() != 0) return "";
  Snapshot s;
  s.step = steps_done_;
  s.rng = sampler_.state();
  s.widths.assign(model_.widths().begin(), model_.widths().end());
  s.optimizer = optimizer_->name();
  s.params = model_.params();
  s.optimizer_state = optimizer_state();
  return write_snapshot_file(options_.ckpt_dir, steps_done_, encode_snapshot(s));
}

std::string Trainer::resume() {
  if (options_.ckpt_dir.empty()) return "";
  // Rank 0 reads; everyone learns the size first so that they can size the buffer for the second broadcast.
  std::vector<uint8_t> bytes;
  std::string path;
  if (group_->rank() == 0) {
    if (std::optional<SnapshotFile> f = find_latest_snapshot(options_.ckpt_dir)) {
      bytes = std::move(f->bytes);
      path = f->path;
    }
  }
  int64_t size = static_cast<int64_t>(bytes.size());
  group_->broadcast(dcomm::Buffer(&size, 1), 0);
  if (size == 0) return "";
  bytes.resize(static_cast<std::size_t>(size));
  group_->broadcast(dcomm::Buffer(bytes), 0);

  const Snapshot s = decode_snapshot(bytes, path.empty() ? "broadcast by rank 0" : path);
  if (std::vector<int>(s.widths.begin(), s.widths.end()) != model_.widths() || s.optimizer != optimizer_->name() ||
      s.params.size() != model_.param_count()) {
    throw std::runtime_error("snapshot " + path + " was written by a run with another model shape or optimizer ('" +
                             s.optimizer + "'); use a fresh --ckpt-dir or the original flags");
  }
  model_.params() = s.params;
  ByteReader r(s.optimizer_state.data(), s.optimizer_state.size());
  optimizer_->load(r);
  sampler_.set_state(s.rng);
  steps_done_ = s.step;
  return path.empty() ? "rank 0's snapshot" : path;
}

}  // namespace examples

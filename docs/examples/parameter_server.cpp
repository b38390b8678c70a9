#include "parameter_server.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <stdexcept>

#include "dataset.hpp"
#include "mlp.hpp"

namespace examples {

namespace {

class ParameterServer {
 public:
  ParameterServer(dcomm::ProcessGroup& group, Variant variant, const VariantsConfig& config, const Tags& tags)
      : group_(group),
        rule_(rule_of(variant, group.size() - 1, config.k)),
        config_(config),
        tags_(tags),
        data_(make_teacher_dataset(config.samples, config.dim, config.classes, config.seed)),
        model_(config.widths(), config.seed),
        accum_(model_.param_count(), 0.0f),
        sends_(group) {
    result_.variant = variant;
    result_.initial_loss = model_.evaluate(data_).loss;
  }

  VariantResult run() {
    const int64_t target = static_cast<int64_t>(config_.epochs) * config_.batches_per_epoch();
    const auto start = std::chrono::steady_clock::now();
    if (rule_.synchronous) {
      run_synchronous(target);
    } else {
      run_asynchronous(target);
    }
    result_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result_.epochs = static_cast<double>(result_.applied) / config_.batches_per_epoch();
    finish();
    result_.final_loss = model_.evaluate(data_).loss;
    return result_;
  }

 private:
  struct Slot {
    std::vector<float> buffer;
    int64_t version = 0;
    dcomm::WorkPtr work;
  };

  int learners() const { return group_.size() - 1; }

  std::string describe_wait() const {
    std::string versions;
    for (const std::unique_ptr<Slot>& s : slots_)
      versions += (versions.empty() ? "" : ", ") + std::to_string(s->version);
    return std::string(to_string(result_.variant)) + " parameter server (rank 0 of " + std::to_string(group_.size()) +
           "): waiting for any of " + std::to_string(learners()) + " learners' gradients, " +
           std::to_string(slots_.size()) + " receives posted for model versions [" + versions + "], " +
           std::to_string(accum_count_) + " of " + std::to_string(rule_.gradients_per_update) + " in hand";
  }

  void send_model(int learner, int64_t version) {
    std::vector<float> msg(kModelHeader + model_.param_count());
    set_version(msg, version);
    std::copy(model_.params().begin(), model_.params().end(), msg.begin() + kModelHeader);
    sends_.post(std::move(msg), learner, tags_.model_tag());
  }

  void post_slot(int64_t version) {
    auto slot = std::make_unique<Slot>();
    slot->buffer.resize(model_.param_count() + 1);
    slot->version = version;
    slot->work = group_.irecv(dcomm::Buffer(slot->buffer), dcomm::kAnySource, tags_.grad_tag(version));
    slots_.push_back(std::move(slot));
  }

  // Waits until one posted receive has its gradient; removes it from the slots and returns it.
  std::unique_ptr<Slot> next_gradient() {
    std::size_t found = slots_.size();
    poll_until(
        [&] {
          for (std::size_t i = 0; i < slots_.size(); ++i)
            if (slots_[i]->work->is_completed()) return (found = i), true;
          return false;
        },
        config_.timeout, describe_wait());
    std::unique_ptr<Slot> slot = std::move(slots_[found]);
    slots_.erase(slots_.begin() + static_cast<std::ptrdiff_t>(found));
    slot->work->wait(config_.timeout);  // rethrows a failed receive
    received_[slot->work->source()].push_back(slot->version);
    return slot;
  }

  void accumulate(const Slot& slot) {
    for (std::size_t i = 0; i < accum_.size(); ++i) accum_[i] += slot.buffer[i];
    ++accum_count_;
    staleness_sum_ += static_cast<double>(version_ - slot.version);
  }

  void apply_update() {
    const float scale = config_.lr / static_cast<float>(accum_count_);
    std::vector<float>& p = model_.params();
    for (std::size_t i = 0; i < p.size(); ++i) p[i] -= scale * accum_[i];
    std::fill(accum_.begin(), accum_.end(), 0.0f);
    result_.applied += accum_count_;
    accum_count_ = 0;
    ++version_;
    ++result_.updates;
  }

  // Withdraws every posted receive. One may have matched a message just before; then it completes normally and the
  // gradient is counted as received but unused.
  void cancel_slots() {
    for (const std::unique_ptr<Slot>& slot : slots_) {
      slot->work->abort();
      try {
        slot->work->wait(config_.timeout);
        received_[slot->work->source()].push_back(slot->version);
        ++result_.discarded;
      } catch (const dcomm::AbortedError&) {
        ++result_.cancelled;
      }
    }
    slots_.clear();
  }

  // Synchronous variants: every round hands model v to all learners and takes gradients of v only.
  void run_synchronous(int64_t target) {
    const int posts = rule_.batch ? rule_.gradients_per_update : learners();
    while (result_.applied < target) {
      for (int l = 1; l <= learners(); ++l) send_model(l, version_);
      for (int i = 0; i < posts; ++i) post_slot(version_);
      while (accum_count_ < rule_.gradients_per_update) accumulate(*next_gradient());
      cancel_slots();  // K-sync: the P-K stragglers' receives
      apply_update();
    }
  }

  // Asynchronous variants: one receive per learner at work, for the version that learner holds; gradients of any
  // age are applied, K at a time.
  void run_asynchronous(int64_t target) {
    for (int l = 1; l <= learners(); ++l) {
      send_model(l, version_);
      post_slot(version_);
    }
    std::vector<int> waiting;  // learners whose gradient is in the pending update and who wait for the result
    while (result_.applied < target) {
      std::unique_ptr<Slot> slot = next_gradient();
      const int source = slot->work->source();
      accumulate(*slot);
      if (rule_.batch) {  // K-batch-async: the learner goes on at once with whatever model is current
        send_model(source, version_);
        post_slot(version_);
      } else {
        waiting.push_back(source);
      }
      if (accum_count_ < rule_.gradients_per_update) continue;
      apply_update();
      for (int l : waiting) {
        send_model(l, version_);
        post_slot(version_);
      }
      waiting.clear();
    }
  }

  // Stops the learners and receives every gradient they sent that no receive has matched, so nothing is left over.
  void finish() {
    for (int l = 1; l <= learners(); ++l) send_model_stop(l);
    cancel_slots();
    for (int l = 1; l <= learners(); ++l) {
      int64_t header[2] = {0, 0};
      const dcomm::P2POptions bounded{config_.timeout, false, nullptr};
      group_.recv(dcomm::Buffer(header, 2), l, tags_.bye_tag(), bounded);
      std::vector<int64_t> sent(static_cast<std::size_t>(header[0]));
      group_.recv(dcomm::Buffer(sent), l, tags_.list_tag(), bounded);
      result_.sent += header[0];
      result_.interrupted += header[1];
      for (int64_t v : unmatched(l, sent)) {
        std::vector<float> late(model_.param_count() + 1);
        group_.recv(dcomm::Buffer(late), l, tags_.grad_tag(v), bounded);
        ++result_.drained;
      }
    }
    sends_.wait_all(config_.timeout);
    if (result_.sent != result_.applied + result_.discarded + result_.drained) {
      throw std::logic_error("parameter server: learners sent " + std::to_string(result_.sent) +
                             " gradients but only " +
                             std::to_string(result_.applied + result_.discarded + result_.drained) + " were received");
    }
    result_.mean_staleness = result_.applied > 0 ? staleness_sum_ / static_cast<double>(result_.applied) : 0;
  }

  void send_model_stop(int learner) {
    std::vector<float> msg(kModelHeader);
    set_version(msg, kStopVersion);
    sends_.post(std::move(msg), learner, tags_.model_tag());
  }

  // The versions a learner sent that the PS has not received: sent minus received, as multisets.
  std::vector<int64_t> unmatched(int learner, std::vector<int64_t> sent) {
    std::vector<int64_t> got = received_[learner];
    std::sort(sent.begin(), sent.end());
    std::sort(got.begin(), got.end());
    std::vector<int64_t> missing;
    std::set_difference(sent.begin(), sent.end(), got.begin(), got.end(), std::back_inserter(missing));
    if (got.size() + missing.size() != sent.size()) {
      throw std::logic_error("parameter server: received gradients from learner " + std::to_string(learner) +
                             " that it says it never sent");
    }
    return missing;
  }

  dcomm::ProcessGroup& group_;
  VariantRule rule_;
  const VariantsConfig& config_;
  Tags tags_;
  Dataset data_;
  Mlp model_;
  std::vector<float> accum_;
  int accum_count_ = 0;
  int64_t version_ = 0;
  double staleness_sum_ = 0;
  SendQueue sends_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::map<int, std::vector<int64_t>> received_;  // learner -> versions of the gradients received from it
  VariantResult result_;
};

}  // namespace

VariantResult run_parameter_server(dcomm::ProcessGroup& group, Variant variant, const VariantsConfig& config,
                                   const Tags& tags) {
  return ParameterServer(group, variant, config, tags).run();
}

}  // namespace examples

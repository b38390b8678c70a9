#include "runtime/process_group_impl.hpp"

#include <fmt/format.h>

#include <dcomm/error.hpp>

#include "collectives/validate.hpp"
#include "rendezvous/failure_record.hpp"
#include "runtime/cuda/device.hpp"
#include "runtime/cuda/stream_order.hpp"
#include "transports/tags.hpp"

namespace dcomm::runtime {

ProcessGroupImpl::ProcessGroupImpl(std::shared_ptr<World> world, coll::GroupView view, std::shared_ptr<Store> store)
    : world_(std::move(world)),
      view_(std::move(view)),
      label_(view_.context == 0 ? fmt::format("rank {}/{}", view_.rank, view_.size)
                                : fmt::format("rank {}/{} of group {}", view_.rank, view_.size, view_.context)),
      store_(std::move(store)),
      // A device-side wait outlives the collective's own timeout by a margin, so it gives up only when the
      // collective is certainly over.
      streams_(world_->timeout == kNoTimeout ? kNoTimeout : world_->timeout + std::chrono::seconds(10)) {
  auto p2p = std::make_shared<P2PGroup>();
  p2p->mesh = world_->mesh;
  p2p->world_to_group.assign(static_cast<std::size_t>(world_->identity.world_size), -1);
  for (int g = 0; g < view_.size; ++g) p2p->world_to_group[static_cast<std::size_t>(view_.world_ranks[g])] = g;
  p2p->label = label_;
  p2p_ = std::move(p2p);
  recorder_ = world_->recorders->add(view_.context, view_.world_ranks);
  inline_args_.chosen_algorithm = recorder_->algorithm_slot();
  engine_ = coll::Engine::create(view_);
}

void ProcessGroupImpl::fail_recorded(uint64_t seq) {
  // Called from the handler of run_recorded()'s call: `throw;` rethrows that call's failure.
  try {
    throw;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kTimeout || !world_->failure_store) {
      recorder_->end(false);
      throw;
    }
    // Which ranks never reached this call: asked of every rank (or read from the first asker's report). This
    // call stays "running" in the recorder meanwhile: that is where this rank is.
    std::string report = report_hang(*world_->failure_store, *world_->recorders, *recorder_, *world_->mesh, seq);
    recorder_->end(false);
    std::string text = e.what();
    // The rank that holds up the call leads, as for a death (docs/errors.md, blame rules).
    auto root = rdzv::read_failure(*world_->failure_store);
    if (root && root->rank != world_->identity.rank && text.find("failed first") == std::string::npos) {
      text = fmt::format("rank {} failed first: {}; this rank saw: {}", root->rank, root->describe(), text);
    }
    throw TimeoutError(fmt::format("{}; flight recorder: {}", text, report));
  } catch (...) {
    recorder_->end(false);
    throw;
  }
}

// Small, so that it is inlined into its two callers (the fast path of an 8 B call counts its instructions); the
// failure's handling is fail_recorded()'s.
// The most elements (8 B each at most: 32 KiB, microseconds of copying) of a call whose end the recorder may take
// for its start when it never waited (run_recorded).
constexpr std::size_t kRecordedAtStartCount = 4096;

[[gnu::always_inline]] inline void ProcessGroupImpl::run_recorded(const coll::Args& args, const std::string& algorithm,
                                                                  const Deadline& deadline, uint64_t seq,
                                                                  std::string_view problem) {
  // The start from the coarse clock, like the end: the deadline may not have started (Deadline::from_first_wait).
  const std::size_t count = std::max(args.send.count, args.recv.count);
  recorder_->begin(seq, args.coll, args.send.count != 0 ? args.send.dtype : args.recv.dtype, count, args.root,
                   coarse_now());
  try {
    engine_->run(args, algorithm, deadline, seq, problem);
  } catch (...) {
    fail_recorded(seq);
  }
  // A small call whose deadline never started never waited for a peer (every wait starts it): it ended within the
  // coarse clock's tick of its start, so the recorder takes its start for its end (a rooted 8 B call's sender, or a
  // reader whose data was there: one clock read a call fewer).
  recorder_->end(true, !deadline.started() && count <= kRecordedAtStartCount);
}

ProcessGroupImpl::~ProcessGroupImpl() = default;

void ProcessGroupImpl::throw_unusable(const char* op) const {
  if (world_->shrunk) {
    throw AbortedError(fmt::format("{} {}: this group was shrunk after a failure and cannot be used; use the group "
                                   "that shrink() returned",
                                   op, label()));
  }
  if (auto cause = world_->mesh->poisoned()) {
    try {
      std::rethrow_exception(cause);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("{} {}: the group failed earlier and cannot be used: {}", op, label(),
                                        e.what()));
    }
  }
  throw Error(ErrorCode::kInternal, fmt::format("{} {}: the group's mesh reports a failure but holds none", op, label()));
}

void ProcessGroupImpl::check_peer(const char* op, int peer, bool allow_any) const {
  if (allow_any && peer == kAnySource) return;
  if (peer < 0 || peer >= view_.size) {
    throw InvalidUsageError(fmt::format("{} {}: peer rank {} is outside the group (valid: 0..{}{})", op, label(), peer,
                                        view_.size - 1, allow_any ? ", or kAnySource" : ""));
  }
}

namespace {

void check_buffer(const char* op, const std::string& label, const Buffer& buf, const char* name) {
  if (buf.data == nullptr && buf.count > 0) {
    throw InvalidUsageError(fmt::format("{} {}: {} buffer is null but holds {} elements", op, label, name, buf.count));
  }
  if (!coll::bytes_fit(buf.count, dtype_size(buf.dtype))) {  // else the byte size wraps and a short message goes
    throw InvalidUsageError(fmt::format("{} {}: {} buffer's count {} of {} is more bytes than a call can address (the "
                                        "byte size overflows); check the count",
                                        op, label, name, buf.count, to_string(buf.dtype)));
  }
}

void check_tag(const char* op, const std::string& label, int tag) {
  if (tag < 0 || static_cast<uint64_t>(tag) > transport::kMaxUserTag) {
    throw InvalidUsageError(fmt::format("{} {}: tag {} is negative; tags are 0..{}", op, label, tag,
                                        transport::kMaxUserTag));
  }
}

}  // namespace

WorkPtr ProcessGroupImpl::send(const Buffer& buf, int dst, int tag, const P2POptions& opts) {
  return post_p2p(true, buf, dst, tag, opts);
}

WorkPtr ProcessGroupImpl::recv(const Buffer& buf, int src, int tag, const P2POptions& opts) {
  return post_p2p(false, buf, src, tag, opts);
}

WorkPtr ProcessGroupImpl::post_p2p(bool is_send, const Buffer& buf, int peer, int tag, const P2POptions& opts) {
  const char* op = is_send ? "send" : "recv";
  check_peer(op, peer, !is_send);
  check_buffer(op, label(), buf, is_send ? "send" : "receive");
  check_tag(op, label(), tag);
  Buffer b = buf;
  // Host memory that asks for no detection (the usual message) is a host message: nothing for call_device to find.
  const bool plain_host = !buf.detect_device && buf.device.is_host();
  if (!plain_host) b.device = call_device(op, {{op, &buf}});
  check_usable(op);
  // A small host send that its transport hands over at once (an eager shm message) is over before this returns,
  // whether or not the caller asked to wait: no handle, no request, no deadline (Mesh::send_now).
  if (is_send && plain_host &&
      p2p_->mesh->send_now(view_.world_ranks[static_cast<std::size_t>(peer)],
                           transport::p2p_tag(view_.context, static_cast<uint64_t>(tag)), b.data, b.bytes())) {
    return completed_work();
  }
  Duration timeout = opts.timeout == kDefaultTimeout ? world_->timeout : opts.timeout;
  const Deadline deadline = Deadline::after(timeout);
  // Device buffers: the work the caller queued on its stream before this call must be over before a transport
  // touches the buffer. Point-to-point calls wait for it on the host (collectives do so on the group's worker).
  if (!b.device.is_host()) {
    wait_stream_work(b.device, opts.stream, deadline, P2PWork::describe(*p2p_, is_send, peer, tag));
  }
  uint64_t wire_tag = transport::p2p_tag(view_.context, static_cast<uint64_t>(tag));
  int world_peer = peer == kAnySource ? kAnySource : view_.world_ranks[static_cast<std::size_t>(peer)];
  auto work = std::make_shared<P2PWork>(p2p_, is_send, peer, tag, deadline);
  const transport::RequestPtr request(work, &work->request());
  if (is_send) {
    p2p_->mesh->isend(request, world_peer, wire_tag, b.data, b.bytes(), b.device);
  } else {
    p2p_->mesh->irecv(request, world_peer, wire_tag, b.data, b.bytes(), b.device);
  }
  if (!opts.async_op) work->wait(kDefaultTimeout);
  return work;
}

namespace {

coll::Args args_of(Collective c, const Buffer& send, const Buffer& recv, int root = 0, Reduction red = {}) {
  coll::Args a;
  a.coll = c;
  a.send = send;
  a.recv = recv;
  a.root = root;
  a.red = red;
  return a;
}

}  // namespace

[[gnu::always_inline]] inline WorkPtr ProcessGroupImpl::run_inline(const coll::Args& args, const CollectiveOptions& opts,
                                                                    std::string_view problem, Executor::Entry entry) {
  // Nothing queued ahead (the caller holds the executor: try_enter_inline): run on the caller's thread, without a
  // task object, a hand-off or a handle of its own (a failure is thrown, so the handle returned is always a
  // completed one).
  const uint64_t seq = executor_.next_seq();
  const Duration timeout = opts.timeout == kDefaultTimeout ? world_->timeout : opts.timeout;
  try {
    run_recorded(args, opts.algorithm, Deadline::from_first_wait(timeout), seq, problem);
  } catch (...) {
    executor_.leave_inline(entry);
    throw;
  }
  executor_.leave_inline(entry);
  return completed_work();
}

WorkPtr ProcessGroupImpl::call(Collective c, const Buffer& send, const Buffer& recv, int root, Reduction red,
                               const CollectiveOptions& opts) {
  // The usual call - blocking, on host buffers that ask for no detection - with nothing queued ahead runs in the
  // group's own Args (inline_args_, the caller holding the executor), which it neither builds nor drops: what
  // submit() would do with it, less its checks for device buffers and tasks (with the engine's direct way, an 8 B
  // broadcast's ~950 instructions became ~720: docs/benchmark.md, session 25). Any other call, or one that finds the
  // group unusable, goes through submit().
  if (!opts.async_op && !send.detect_device && !recv.detect_device && send.device.is_host() &&
      recv.device.is_host() && usable()) {
    const Executor::Entry entry = executor_.try_enter_inline();
    if (entry != Executor::Entry::kNone) {
      coll::Args& a = inline_args_;
      a.coll = c;
      a.send = send;
      a.recv = recv;
      a.root = root;
      a.red = red;
      return run_inline(a, opts, {}, entry);
    }
  }
  return submit(args_of(c, send, recv, root, red), opts);
}

WorkPtr ProcessGroupImpl::submit(coll::Args&& args, const CollectiveOptions& opts) {
  // A caller mistake does not throw here: the call still takes its number and runs, and the engine finds the
  // mistake (or takes `problem`) and fails the call on every rank through the call check, naming this rank. Had
  // this rank thrown alone, the others' call would pair with this rank's next one.
  std::string problem;
  // Host and device buffers may not mix in one call; a buffer asking for detection learns its device here.
  Device device = Device::host();
  // Host buffers that ask for no detection (the usual call) are a host call: nothing for call_device to find.
  const bool plain_host = !args.send.detect_device && !args.recv.detect_device && args.send.device.is_host() &&
                          args.recv.device.is_host();
  try {
    if (!plain_host) device = call_device(to_string(args.coll), {{"send", &args.send}, {"recv", &args.recv}});
  } catch (const Error& e) {
    problem = e.what();
  }
  args.send.device = args.recv.device = device;
  args.send.detect_device = args.recv.detect_device = false;
  if (!usable()) throw_unusable(to_string(args.coll));
  args.chosen_algorithm = recorder_->algorithm_slot();
  if (device.is_host() && !opts.async_op) {
    const Executor::Entry entry = executor_.try_enter_inline();
    if (entry != Executor::Entry::kNone) return run_inline(args, opts, problem, entry);
  }
  Duration timeout = opts.timeout == kDefaultTimeout ? world_->timeout : opts.timeout;
  // The call's number is drawn when it runs (Executor::next_seq: by whoever holds the executor, in the order the
  // calls run, which is the order they were issued); the engine's errors name it.
  auto work = std::make_shared<CollectiveWork>(std::string(to_string(args.coll)) + ' ' + label_, world_->timeout);
  std::string algorithm = opts.algorithm;
  Executor::Task task;
  if (device.is_host()) {
    // The deadline starts when the collective first waits, not when it was queued behind others.
    task = [this, args = std::move(args), algorithm, timeout, problem = std::move(problem)] {
      run_recorded(args, algorithm, Deadline::from_first_wait(timeout), executor_.next_seq(), problem);
    };
  } else {
    // The collective waits (without blocking the caller) for the work already queued on the caller's stream,
    // and wait_stream() lets later work on a stream wait for the collective on the device.
    StreamOrder& order = streams_.get(device);
    uint64_t ticket = order.record_input(opts.stream);
    work->set_stream_waiter([&order, ticket](void* stream) { order.complete_on(ticket, stream); });
    task = [this, args = std::move(args), algorithm, timeout, &order, ticket, what = work->what()] {
      Deadline deadline = Deadline::after(timeout);
      CollectiveScope scope(order, ticket, deadline, what);
      run_recorded(args, algorithm, deadline, executor_.next_seq());
    };
  }
  executor_.submit(work, std::move(task), opts.async_op);
  if (!opts.async_op) work->wait(kNoTimeout);  // already finished: rethrows its failure
  return work;
}

WorkPtr ProcessGroupImpl::all_reduce(const Buffer& send, const Buffer& recv, Reduction red,
                                     const CollectiveOptions& opts) {
  return call(Collective::kAllReduce, send, recv, 0, red, opts);
}

WorkPtr ProcessGroupImpl::broadcast(const Buffer& buf, int root, const CollectiveOptions& opts) {
  return call(Collective::kBroadcast, buf, buf, root, {}, opts);
}

WorkPtr ProcessGroupImpl::reduce(const Buffer& send, const Buffer& recv, int root, Reduction red,
                                 const CollectiveOptions& opts) {
  return call(Collective::kReduce, send, recv, root, red, opts);
}

WorkPtr ProcessGroupImpl::scatter(const Buffer& send, const Buffer& recv, int root, const CollectiveOptions& opts) {
  return call(Collective::kScatter, send, recv, root, {}, opts);
}

WorkPtr ProcessGroupImpl::scatterv(const Buffer& send, const std::vector<std::size_t>& counts,
                                   const std::vector<std::size_t>& displs, const Buffer& recv, int root,
                                   const CollectiveOptions& opts) {
  coll::Args a = args_of(Collective::kScatter, send, recv, root);
  a.vector_variant = true;
  a.send_counts = counts;
  a.send_displs = displs;
  return submit(std::move(a), opts);
}

WorkPtr ProcessGroupImpl::gather(const Buffer& send, const Buffer& recv, int root, const CollectiveOptions& opts) {
  return call(Collective::kGather, send, recv, root, {}, opts);
}

WorkPtr ProcessGroupImpl::gatherv(const Buffer& send, const Buffer& recv, const std::vector<std::size_t>& counts,
                                  const std::vector<std::size_t>& displs, int root, const CollectiveOptions& opts) {
  coll::Args a = args_of(Collective::kGather, send, recv, root);
  a.vector_variant = true;
  a.recv_counts = counts;
  a.recv_displs = displs;
  return submit(std::move(a), opts);
}

WorkPtr ProcessGroupImpl::all_gather(const Buffer& send, const Buffer& recv, const CollectiveOptions& opts) {
  return call(Collective::kAllGather, send, recv, 0, {}, opts);
}

WorkPtr ProcessGroupImpl::reduce_scatter(const Buffer& send, const Buffer& recv, Reduction red,
                                         const CollectiveOptions& opts) {
  return call(Collective::kReduceScatter, send, recv, 0, red, opts);
}

WorkPtr ProcessGroupImpl::all_to_all(const Buffer& send, const Buffer& recv, const CollectiveOptions& opts) {
  return call(Collective::kAllToAll, send, recv, 0, {}, opts);
}

WorkPtr ProcessGroupImpl::all_to_all_v(const Buffer& send, const std::vector<std::size_t>& send_counts,
                                       const std::vector<std::size_t>& send_displs, const Buffer& recv,
                                       const std::vector<std::size_t>& recv_counts,
                                       const std::vector<std::size_t>& recv_displs, const CollectiveOptions& opts) {
  coll::Args a = args_of(Collective::kAllToAll, send, recv);
  a.vector_variant = true;
  a.send_counts = send_counts;
  a.send_displs = send_displs;
  a.recv_counts = recv_counts;
  a.recv_displs = recv_displs;
  return submit(std::move(a), opts);
}

WorkPtr ProcessGroupImpl::barrier(const CollectiveOptions& opts) {
  return call(Collective::kBarrier, Buffer{}, Buffer{}, 0, {}, opts);
}

void ProcessGroupImpl::set_algorithm(Collective c, const std::string& name) { engine_->set_algorithm(c, name); }

std::string ProcessGroupImpl::explain(Collective c, std::size_t bytes, Device device) const {
  return engine_->explain(c, bytes, device);
}

void ProcessGroupImpl::abort() noexcept {
  auto cause = std::make_exception_ptr(AbortedError(fmt::format("the process group ({}) was aborted", label())));
  world_->mesh->poison(cause);
  executor_.fail_pending(cause);
}

}  // namespace dcomm::runtime

#pragma once
// A call's shape: every field of a collective call that validation (validate.hpp), the algorithm's choice
// (selector.hpp) and the call check's descriptor (call_check.hpp) read, and nothing they do not (the data's
// addresses enter only as null or not, and in place or not). Two calls of one shape on one group are valid alike,
// get the same algorithm (for the same overrides) and the same descriptor, so the engine derives those once per
// shape and reuses them while the calls repeat it (engine.cpp): an 8-byte call in a loop skips a few hundred
// instructions of checks that cannot come out differently.

#include <cstddef>

#include "collectives/engine.hpp"

namespace dcomm::coll {

struct CallShape {
  Collective coll{};
  DType send_dtype{}, recv_dtype{};
  ReduceOp op{};
  bool in_place = false;
  bool send_null = false, recv_null = false;
  /// false: a v-variant (its counts and displacements are not part of the shape) or premul_sum (its scale is
  /// validated and not part of the shape): such calls are never reused, and a default shape is never one.
  bool cacheable = false;
  int root = 0;
  Device send_device{}, recv_device{};
  std::size_t send_count = 0, recv_count = 0;
  bool operator==(const CallShape&) const = default;

  /// Whether `a` is a call of this shape: `*this == of(a)` for a cacheable shape, without building one (a repeated
  /// call's first test); false for a shape that is not cacheable, as no call repeats one.
  bool matches(const Args& a) const {
    return cacheable && !a.vector_variant && coll == a.coll && send_count == a.send.count &&
           recv_count == a.recv.count && send_dtype == a.send.dtype && recv_dtype == a.recv.dtype && op == a.red.op &&
           root == a.root && in_place == (a.send.data == a.recv.data) && send_null == (a.send.data == nullptr) &&
           recv_null == (a.recv.data == nullptr) && send_device == a.send.device && recv_device == a.recv.device;
  }

  static CallShape of(const Args& a) {
    CallShape s;
    s.coll = a.coll;
    s.send_dtype = a.send.dtype;
    s.recv_dtype = a.recv.dtype;
    s.op = a.red.op;
    s.in_place = a.send.data == a.recv.data;
    s.send_null = a.send.data == nullptr;
    s.recv_null = a.recv.data == nullptr;
    s.cacheable = !a.vector_variant && a.red.op != ReduceOp::kPreMulSum;
    s.root = a.root;
    s.send_device = a.send.device;
    s.recv_device = a.recv.device;
    s.send_count = a.send.count;
    s.recv_count = a.recv.count;
    return s;
  }
};

}  // namespace dcomm::coll

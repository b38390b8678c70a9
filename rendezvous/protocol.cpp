#include "rendezvous/protocol.hpp"

#include <fmt/format.h>

#include <cstring>

namespace dcomm::rdzv::proto {
namespace {

// Explicit little-endian so the wire format does not depend on the host.
void put_le(Bytes& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint64_t get_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

const char* to_string(Op op) noexcept {
  switch (op) {
    case Op::kHello: return "hello";
    case Op::kSet: return "set";
    case Op::kGet: return "get";
    case Op::kAdd: return "add";
    case Op::kCompareSet: return "compare_set";
    case Op::kCheck: return "check";
    case Op::kWait: return "wait";
    case Op::kDelete: return "delete_key";
    case Op::kNumKeys: return "num_keys";
    case Op::kMultiGet: return "multi_get";
    case Op::kMultiSet: return "multi_set";
  }
  return "unknown";
}

void put_header(Bytes& out, uint8_t code, uint32_t length) {
  put_le(out, kMagic, 4);
  out.push_back(kVersion);
  out.push_back(code);
  put_le(out, 0, 2);
  put_le(out, length, 4);
}

std::optional<std::string> check_header(const uint8_t* data, Header* out) {
  auto magic = static_cast<uint32_t>(get_le(data, 4));
  if (magic != kMagic) return fmt::format("bad magic 0x{:08x} (expected 0x{:08x}: not a dcomm store client?)", magic, kMagic);
  if (data[4] != kVersion) return fmt::format("unsupported protocol version {} (this side speaks {})", data[4], kVersion);
  out->code = data[5];
  out->length = static_cast<uint32_t>(get_le(data + 8, 4));
  return std::nullopt;
}

Writer& Writer::u8(uint8_t v) {
  buf_.push_back(v);
  return *this;
}
Writer& Writer::u32(uint32_t v) {
  put_le(buf_, v, 4);
  return *this;
}
Writer& Writer::i64(int64_t v) {
  put_le(buf_, static_cast<uint64_t>(v), 8);
  return *this;
}
Writer& Writer::bytes(const uint8_t* data, std::size_t n) {
  u32(static_cast<uint32_t>(n));
  buf_.insert(buf_.end(), data, data + n);
  return *this;
}
Writer& Writer::keys(const std::vector<std::string>& ks) {
  u32(static_cast<uint32_t>(ks.size()));
  for (const auto& k : ks) str(k);
  return *this;
}

Bytes Writer::frame(uint8_t code) const {
  Bytes out;
  out.reserve(kHeaderBytes + buf_.size());
  put_header(out, code, static_cast<uint32_t>(buf_.size()));
  out.insert(out.end(), buf_.begin(), buf_.end());
  return out;
}

const uint8_t* Reader::take(std::size_t n) {
  if (static_cast<std::size_t>(end_ - p_) < n) {
    throw ProtocolError{fmt::format("payload ends early: field needs {} bytes, {} left", n, end_ - p_)};
  }
  const uint8_t* at = p_;
  p_ += n;
  return at;
}

uint8_t Reader::u8() { return *take(1); }
uint32_t Reader::u32() { return static_cast<uint32_t>(get_le(take(4), 4)); }
int64_t Reader::i64() { return static_cast<int64_t>(get_le(take(8), 8)); }

Bytes Reader::bytes() {
  uint32_t n = u32();
  const uint8_t* at = take(n);
  return Bytes(at, at + n);
}

std::string Reader::str() {
  uint32_t n = u32();
  const uint8_t* at = take(n);
  return std::string(reinterpret_cast<const char*>(at), n);
}

std::vector<std::string> Reader::keys() {
  uint32_t n = u32();
  // Each key needs at least its 4-byte length, so a bogus count cannot make us reserve gigabytes.
  if (n > static_cast<std::size_t>(end_ - p_) / 4) throw ProtocolError{fmt::format("key count {} exceeds the payload", n)};
  std::vector<std::string> out;
  out.reserve(n);
  for (uint32_t i = 0; i < n; ++i) out.push_back(str());
  return out;
}

void Reader::expect_done() const {
  if (!done()) throw ProtocolError{fmt::format("{} unexpected bytes after the last field", end_ - p_)};
}

}  // namespace dcomm::rdzv::proto

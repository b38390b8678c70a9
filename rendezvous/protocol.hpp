#pragma once
// The TCP store's wire protocol (described for humans in docs/store.md).
//
// Every message, request or response, is one frame: a 12-byte header followed by `length` payload bytes.
//   u32 magic   'DCST' (0x54534344 little-endian)   u8 version (1)   u8 opcode or status   u16 reserved (0)
//   u32 length  payload bytes that follow
// Integers are little-endian. A string or byte field is u32 length + bytes; a key list is u32 count + strings.
// The first request on a connection must be kHello carrying the shared secret (possibly empty); a server drops
// a client whose first frame is anything else, or whose secret does not match its own.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dcomm::rdzv::proto {

using Bytes = std::vector<uint8_t>;

inline constexpr uint32_t kMagic = 0x54534344;  // "DCST" in memory order
inline constexpr uint8_t kVersion = 1;
inline constexpr std::size_t kHeaderBytes = 12;
/// Room in a frame beyond one key and one value: field lengths, counts, a delta.
inline constexpr std::size_t kFrameSlack = 64 * 1024;

enum class Op : uint8_t {
  kHello = 1,      // secret                      -> (empty)
  kSet = 2,        // key, value                  -> (empty)
  kGet = 3,        // key                         -> value             (parked until the key exists)
  kAdd = 4,        // key, i64 delta              -> i64 new value
  kCompareSet = 5, // key, expected, desired      -> value afterwards
  kCheck = 6,      // keys                        -> u8 all exist
  kWait = 7,       // keys                        -> (empty)           (parked until every key exists)
  kDelete = 8,     // key                         -> u8 existed
  kNumKeys = 9,    // (empty)                     -> i64 count
  kMultiGet = 10,  // keys                        -> u32 count + values (parked until every key exists)
  kMultiSet = 11,  // u32 count + (key, value)... -> (empty)
};
inline constexpr uint8_t kMaxOp = 11;
const char* to_string(Op op) noexcept;

/// A response's status byte (in the opcode position). On kError the payload is one string: the reason.
enum class Status : uint8_t { kOk = 0, kError = 1 };

struct Header {
  uint8_t code = 0;  // an Op in a request, a Status in a response
  uint32_t length = 0;
};

/// Encodes a header into 12 bytes.
void put_header(Bytes& out, uint8_t code, uint32_t length);
/// Why a header is unacceptable ("bad magic 0x...", "unsupported version 7"), or nullopt when it is fine.
std::optional<std::string> check_header(const uint8_t* data, Header* out);

/// The largest payload a peer with these caps accepts in one frame.
inline std::size_t max_payload(std::size_t max_key_bytes, std::size_t max_value_bytes) {
  return max_key_bytes + max_value_bytes + kFrameSlack;
}

/// Builds a payload field by field.
class Writer {
 public:
  Writer& u8(uint8_t v);
  Writer& u32(uint32_t v);
  Writer& i64(int64_t v);
  Writer& bytes(const uint8_t* data, std::size_t n);
  Writer& bytes(const Bytes& b) { return bytes(b.data(), b.size()); }
  Writer& str(const std::string& s) { return bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }
  Writer& keys(const std::vector<std::string>& ks);
  /// The whole frame: header (with this code) then the payload.
  Bytes frame(uint8_t code) const;
  std::size_t size() const { return buf_.size(); }

 private:
  Bytes buf_;
};

/// Reads a payload field by field; every read checks bounds and throws ProtocolError past the end.
class Reader {
 public:
  Reader(const uint8_t* data, std::size_t n) : p_(data), end_(data + n) {}
  uint8_t u8();
  uint32_t u32();
  int64_t i64();
  Bytes bytes();
  std::string str();
  std::vector<std::string> keys();
  bool done() const { return p_ == end_; }
  /// Throws unless the whole payload was consumed.
  void expect_done() const;

 private:
  const uint8_t* take(std::size_t n);
  const uint8_t* p_;
  const uint8_t* end_;
};

/// A malformed payload.
struct ProtocolError {
  std::string reason;
};

}  // namespace dcomm::rdzv::proto

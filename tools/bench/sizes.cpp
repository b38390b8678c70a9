#include "tools/bench/sizes.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace dcomm::bench {

std::optional<std::size_t> parse_size(const std::string& text) {
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.')) return std::nullopt;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  std::string suffix(end);
  for (char& ch : suffix) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (suffix.ends_with("IB")) {
    suffix.resize(suffix.size() - 2);
    if (suffix.empty()) return std::nullopt;  // "iB" alone is not a unit
  } else if (suffix.ends_with("B")) {
    suffix.pop_back();
  }
  double scale = 1;
  if (suffix == "K") {
    scale = 1024.0;
  } else if (suffix == "M") {
    scale = 1024.0 * 1024;
  } else if (suffix == "G") {
    scale = 1024.0 * 1024 * 1024;
  } else if (!suffix.empty()) {
    return std::nullopt;
  }
  double bytes = value * scale;
  if (!std::isfinite(bytes) || bytes < 0 || bytes > static_cast<double>(std::numeric_limits<std::size_t>::max() / 2) ||
      bytes != std::floor(bytes)) {
    return std::nullopt;
  }
  return static_cast<std::size_t>(bytes);
}

std::vector<std::size_t> sweep(std::size_t min_bytes, std::size_t max_bytes, std::size_t factor) {
  std::vector<std::size_t> sizes;
  std::size_t s = min_bytes;
  if (s == 0) {
    sizes.push_back(0);
    s = 1;
  }
  while (s <= max_bytes) {
    sizes.push_back(s);
    if (s > max_bytes / factor) break;  // the next step would pass max (or overflow)
    s *= factor;
  }
  return sizes;
}

Layout layout(Coll c, std::size_t bytes, DType dtype, int world) {
  const std::size_t es = dtype_size(dtype);
  const std::size_t p = static_cast<std::size_t>(world);
  Layout l;
  switch (c) {
    case Coll::kBarrier:
      return l;
    case Coll::kAllReduce:
    case Coll::kBroadcast:
    case Coll::kReduce:
    case Coll::kSendRecv:
      l.send_count = l.recv_count = l.block = bytes / es;
      l.count = l.send_count;
      break;
    case Coll::kAllGather:
    case Coll::kGather:
      l.block = l.send_count = bytes / (es * p);
      l.recv_count = l.block * p;
      l.count = l.recv_count;
      break;
    case Coll::kReduceScatter:
    case Coll::kScatter:
      l.block = l.recv_count = bytes / (es * p);
      l.send_count = l.block * p;
      l.count = l.send_count;
      break;
    case Coll::kAllToAll:
      l.block = bytes / (es * p);
      l.send_count = l.recv_count = l.block * p;
      l.count = l.send_count;
      break;
  }
  l.bytes = l.count * es;
  return l;
}

}  // namespace dcomm::bench

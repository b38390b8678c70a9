#pragma once
// Little helpers to append plain values and arrays to a byte vector and read them back, with bounds checks:
// the checkpoint format and the optimizers' state use them. The format is the machine's native layout, which is
// fine for a snapshot that the same program reads back on the same kind of machine.

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace examples {

class ByteWriter {
 public:
  template <typename T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    append(&value, sizeof(T));
  }
  template <typename T>
  void put_array(const std::vector<T>& values) {
    put<uint64_t>(values.size());
    append(values.data(), values.size() * sizeof(T));
  }
  void append(const void* data, std::size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

class ByteReader {
 public:
  ByteReader(const uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T value;
    std::memcpy(&value, take(sizeof(T)), sizeof(T));
    return value;
  }
  template <typename T>
  std::vector<T> get_array() {
    const uint64_t n = get<uint64_t>();
    if (n > (size_ - pos_) / sizeof(T))
      throw std::runtime_error("truncated data: array of " + std::to_string(n) + " elements");
    std::vector<T> values(n);
    std::memcpy(values.data(), take(n * sizeof(T)), n * sizeof(T));
    return values;
  }
  std::size_t remaining() const { return size_ - pos_; }

 private:
  const uint8_t* take(std::size_t n) {
    if (n > size_ - pos_) {
      throw std::runtime_error("truncated data: wanted " + std::to_string(n) + " bytes at offset " +
                               std::to_string(pos_) + " of " + std::to_string(size_));
    }
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  const uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

}  // namespace examples

#pragma once
// A small, portable random number generator (xoshiro256**, seeded through splitmix64). The examples use it
// instead of <random>'s engines and distributions because its state is four integers that a checkpoint can
// store, and because its output is the same on every platform and standard library: a resumed run, and every
// rank of a multi-node job, must draw exactly the same numbers.

#include <array>
#include <cmath>
#include <cstdint>

namespace examples {

class Rng {
 public:
  using State = std::array<uint64_t, 4>;

  explicit Rng(uint64_t seed) {
    for (uint64_t& word : state_) word = splitmix64(&seed);
  }

  uint64_t next() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Uniform integer in [0, n); n > 0. The modulo bias is below 2^-40 for the sizes the examples use.
  uint64_t below(uint64_t n) { return next() % n; }
  /// Standard normal (Box-Muller; one of the pair is dropped so that the state alone determines the stream).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
  /// Exponential with the given mean.
  double exponential(double mean) { return -mean * std::log(1.0 - uniform()); }

  const State& state() const { return state_; }
  void set_state(const State& s) { state_ = s; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix64(uint64_t* x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  State state_{};
};

/// FNV-1a over bytes: the fingerprint every rank compares to prove it holds the same weights.
inline uint64_t fnv1a64(const void* data, std::size_t bytes, uint64_t hash = 0xCBF29CE484222325ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    hash ^= p[i];
    hash *= 0x100000001B3ull;
  }
  return hash;
}

}  // namespace examples

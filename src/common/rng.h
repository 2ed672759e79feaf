// Rng: the only source of randomness in estuary. Seeded explicitly; the sequence it produces is
// fixed by this file alone (no implementation-defined std:: distributions), so a run with the same
// inputs and seed is bit-for-bit repeatable on any platform.
// Thread-safety: none; give each thread (or each simulation) its own Rng.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace estuary {

class Rng {
 public:
  explicit Rng(uint64_t seed);
  // A uniformly distributed 64-bit value (SplitMix64-seeded xoshiro256**).
  uint64_t Next();
  // Uniform integer in [0, n). REQUIRES: n > 0. Unbiased (rejection sampling).
  uint64_t Uniform(uint64_t n);
  // Uniform double in [0, 1).
  double UniformDouble();
  // Fisher-Yates shuffle driven by this generator.
  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) {
      size_t j = static_cast<size_t>(Uniform(i));
      std::swap(v[i - 1], v[j]);
    }
  }
  // A uniformly random permutation of 0..n-1.
  std::vector<uint32_t> Permutation(uint32_t n);

 private:
  uint64_t s_[4];
};

}  // namespace estuary

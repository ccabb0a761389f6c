// A small deterministic random number generator for the scheduler and the simulator.
//
// The scheduler holds no hidden randomness: callers pass a seed, and the same seed gives the same
// sequence on every platform and standard library (std::uniform_int_distribution and std::shuffle
// are implementation-defined, so they are not used). The generator is SplitMix64 (Steele, Lea and
// Flood, 2014); uniform() is unbiased (rejection sampling). Not thread-safe: one per thread.
#pragma once

#include <cassert>
#include <cstdint>
#include <utility>
#include <vector>

namespace gpupool::sched {

class Rng {
public:
    explicit Rng(std::uint64_t seed) : m_state(seed) {}

    std::uint64_t next() {
        std::uint64_t z = (m_state += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31U);
    }

    // Uniform in [0, n); n > 0.
    std::uint64_t uniform(std::uint64_t n) {
        assert(n > 0);
        const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
        std::uint64_t x = next();
        while (x >= limit) {
            x = next();
        }
        return x % n;
    }

    // Uniform in [0, 1).
    double unit() { return static_cast<double>(next() >> 11U) * 0x1.0p-53; }

    template <class T>
    void shuffle(std::vector<T>& items) {
        for (std::size_t i = items.size(); i > 1; --i) {
            std::size_t j = static_cast<std::size_t>(uniform(i));
            std::swap(items[i - 1], items[j]);
        }
    }

private:
    std::uint64_t m_state;
};

} // namespace gpupool::sched

// Clang thread-safety annotations and a mutex that carries them.
//
// State that several threads touch is guarded by a util::Mutex and marked GUARDED_BY(that mutex);
// functions that expect the caller to hold it say REQUIRES(it). A clang build with
// -Wthread-safety (`.ci/thread-safety`, run by CI) then refuses code that reads or writes such state
// without the lock. Under GCC the macros expand to nothing and util::Mutex is a plain std::mutex.
//
// std::mutex itself carries no annotations in libstdc++, hence the wrapper. Waiting on a condition
// takes a std::condition_variable_any with a util::MutexLock (which is BasicLockable); the analysis
// cannot see the unlock/relock inside wait(), which is correct: the lock is held again when wait
// returns.
#pragma once

#include <mutex>

#if defined(__clang__)
#define GPUPOOL_TSA(x) __attribute__((x))
#else
#define GPUPOOL_TSA(x)
#endif

#define CAPABILITY(x) GPUPOOL_TSA(capability(x))
#define SCOPED_CAPABILITY GPUPOOL_TSA(scoped_lockable)
#define GUARDED_BY(x) GPUPOOL_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) GPUPOOL_TSA(pt_guarded_by(x))
#define REQUIRES(...) GPUPOOL_TSA(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) GPUPOOL_TSA(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) GPUPOOL_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) GPUPOOL_TSA(release_capability(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS GPUPOOL_TSA(no_thread_safety_analysis)

namespace gpupool::util {

class CAPABILITY("mutex") Mutex {
public:
    void lock() ACQUIRE() { m_mutex.lock(); }
    void unlock() RELEASE() { m_mutex.unlock(); }

private:
    std::mutex m_mutex;
};

// Holds a Mutex for its scope. BasicLockable, so std::condition_variable_any can wait with it.
class SCOPED_CAPABILITY MutexLock {
public:
    explicit MutexLock(Mutex& mutex) ACQUIRE(mutex) : m_mutex(mutex) { m_mutex.lock(); }
    ~MutexLock() RELEASE() { m_mutex.unlock(); }
    MutexLock(const MutexLock&) = delete;
    MutexLock& operator=(const MutexLock&) = delete;

    // For std::condition_variable_any::wait, which unlocks and relocks around the wait.
    void lock() NO_THREAD_SAFETY_ANALYSIS { m_mutex.lock(); }
    void unlock() NO_THREAD_SAFETY_ANALYSIS { m_mutex.unlock(); }

private:
    Mutex& m_mutex;
};

} // namespace gpupool::util

// ExitSignal: how a runtime tells the agent, from a thread of its own, that a job may have ended
// (ContainerRuntime::on_exit), so the agent looks at once instead of at its next tick. Shared by the
// runtime and the threads that watch its jobs; a thread that outlives the agent's interest finds
// no one to wake.
#pragma once

#include "core/util/thread_safety.hpp"

#include <functional>
#include <utility>

namespace gpupool::worker {

class ExitSignal {
public:
    // `wake` is called from any thread; nullptr: nobody is told any more.
    void set(std::function<void()> wake) {
        util::MutexLock lock(m_mu);
        m_wake = std::move(wake);
    }
    void fire() {
        util::MutexLock lock(m_mu);
        if (m_wake) {
            m_wake();
        }
    }

private:
    util::Mutex m_mu;
    std::function<void()> m_wake GUARDED_BY(m_mu);
};

} // namespace gpupool::worker

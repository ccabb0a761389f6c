// What the agent settles before it registers (agent.hpp): its folders and its name, the defaults of
// AgentOptions that depend on the machine, and where the model prefetch downloads from. Stateless
// functions of the options and the environment; called on the agent's thread before it starts.
#pragma once

#include "core/util/result.hpp"
#include "worker/cache/hub_fetch.hpp"

namespace gpupool::worker {

struct AgentOptions;

// Creates work_dir (failure: an io Error naming it) and cache_dir (default <work_dir>/cache), and
// names the worker after the host when it has no name.
Status prepare_agent_dirs(AgentOptions& opt);

// The hub the model weights come from: --hub-endpoint, else $HF_ENDPOINT, else HubOptions' default;
// with the owner's token for gated models.
HubOptions hub_options(const AgentOptions& opt);

} // namespace gpupool::worker

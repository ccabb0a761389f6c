// `gpupool template build NAME`: builds one of the research image templates (templates/, see
// templates/README.md) with podman or docker. A template is a folder with either a Dockerfile, or
// a build.sh for images made without a registry (busybox, torch-cpu: root filesystems from
// Debian's packages). A Dockerfile that starts `FROM localhost/gpupool/base:TAG` gets the base
// built first when the engine lacks it. The engine's own output goes to the terminal as it comes.
#pragma once

#include "cmd/cli.hpp"

#include <string>

namespace gpupool::cmd {

struct TemplateOptions {
    GlobalOptions global{};
    std::string name{};
    std::string tag{};              // default localhost/gpupool/NAME:latest
    std::string runtime = "podman"; // podman | docker
    std::string from = "templates"; // the templates folder
};

int run_template_build(const TemplateOptions& options);

} // namespace gpupool::cmd

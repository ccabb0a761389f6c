# How the build is kept short (issue 45; bench/buildtime/build_bench.sh measures it, bench/README.md has
# the figures): each library precompiles the heavy third-party headers its files include, and
# compiles its files in unity batches, so a template the files share (nlohmann::json, fmt) is parsed
# and instantiated once per batch instead of once per file.
#
# For a tight edit loop on one file, configure with -DGPUPOOL_UNITY=OFF: an edit then recompiles that
# file alone instead of its batch. Code must build both ways. CI's .ci/thread-safety compiles each
# file of core/ and worker/ that reaches a thread-safety annotation on its own (with clang, without
# the precompiled header), which catches such a file leaning on its batch neighbours' includes; the
# others it preprocesses alone only (a missing header file, not a missing #include, shows there).
option(GPUPOOL_PCH "Precompile the heavy third-party headers of each library" ON)
option(GPUPOOL_UNITY "Compile each library in unity batches" ON)
set(GPUPOOL_UNITY_BATCH 8 CACHE STRING "Files per unity batch")

# The standard headers nearly every file includes, and the two libraries most of them use.
set(gpupool_pch_common
    <algorithm> <chrono> <cstdint> <filesystem> <fstream> <functional> <map> <memory> <mutex>
    <optional> <set> <sstream> <string> <string_view> <thread> <utility> <vector>
    <nlohmann/json.hpp> <spdlog/spdlog.h>)

# gpupool_speed_up(TARGET [PCH_ONLY] [HEADERS h...] [NO_UNITY file...])
#   PCH_ONLY: a precompiled header but no unity batches (the test files, whose helpers in anonymous
#             namespaces share names: Catch's header is what they repeat).
#   HEADERS: more headers for TARGET's precompiled header (those many of its files include).
#   NO_UNITY: files compiled on their own, without the precompiled header either (one that must see
#             a macro before any header, say).
function(gpupool_speed_up target)
  cmake_parse_arguments(arg "PCH_ONLY" "" "HEADERS;NO_UNITY" ${ARGN})
  if(GPUPOOL_PCH)
    target_precompile_headers(${target} PRIVATE ${gpupool_pch_common} ${arg_HEADERS})
  endif()
  if(GPUPOOL_UNITY AND NOT arg_PCH_ONLY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${GPUPOOL_UNITY_BATCH})
  endif()
  if(arg_NO_UNITY)
    set_source_files_properties(${arg_NO_UNITY} TARGET_DIRECTORY ${target}
                                PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON SKIP_PRECOMPILE_HEADERS ON)
  endif()
endfunction()

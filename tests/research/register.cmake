# The research-image tests, included from tests/CMakeLists.txt.
#
# research.jobs builds (or finds, cached) the torch-cpu image and runs recipes/toy-patching and
# recipes/toy-eval in podman; it needs root and podman, skips (77) without them unless
# GPUPOOL_REQUIRE_CONTAINERS=1, and may download Debian packages on its first run on a machine,
# hence the long timeout. research.startup_hook tests the PyTorch start-up hook with plain python3.
add_test(NAME research.jobs
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/research_jobs.sh $<TARGET_FILE:gpupool>)
set_tests_properties(research.jobs PROPERTIES
                     SKIP_RETURN_CODE 77 LABELS "research;root;slow" TIMEOUT 2700 COST 43)

add_test(NAME research.startup_hook
         COMMAND sh -c "command -v python3 >/dev/null || { echo 'SKIP: no python3'; exit 77; }; exec python3 \"$0\""
                 ${CMAKE_CURRENT_LIST_DIR}/test_startup_hook.py)
set_tests_properties(research.startup_hook PROPERTIES SKIP_RETURN_CODE 77 LABELS research TIMEOUT 120)

# GPUPOOL_STATIC=ON: the dependency targets the layers link, in forms that make one fully static
# executable (`make static`; docs/static.md). The target names are those of the normal build, so
# core/, worker/ and cmd/ link the same names either way.
#   - Debian's .a files: OpenSSL, SQLite3, SQLiteCpp, zlib, c-ares, Boost.Filesystem/Atomic/URL;
#   - header-only: Boost.Asio/Beast/Process, nlohmann-json, CLI11, toml++ (TOML_HEADER_ONLY=1),
#     spdlog + fmt (FMT_HEADER_ONLY=1; Debian's spdlog targets link the shared fmt);
#   - curl 7.88.1, libarchive 3.6.2 and prometheus-cpp 1.0.1 (core) built by .ci/build-static-deps
#     from Debian's source packages (GPUPOOL_STATIC_DEPS: their install prefixes).
# Every library is looked up as .a only, so a missing one fails here rather than linking a .so.
set(GPUPOOL_STATIC_DEPS "" CACHE STRING "Install prefixes of curl, libarchive and prometheus-cpp from .ci/build-static-deps")
if(NOT GPUPOOL_STATIC_DEPS)
  message(FATAL_ERROR "GPUPOOL_STATIC=ON needs -DGPUPOOL_STATIC_DEPS=<prefixes printed by .ci/build-static-deps> "
                      "(make static does both)")
endif()

set(CMAKE_FIND_LIBRARY_SUFFIXES .a)
set(OPENSSL_USE_STATIC_LIBS ON)
set(Boost_USE_STATIC_LIBS ON)

find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(SQLiteCpp CONFIG REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(ZLIB REQUIRED)
find_package(Threads REQUIRED)
find_package(Boost 1.81 CONFIG REQUIRED COMPONENTS filesystem url)
find_library(GPUPOOL_CARES_LIBRARY NAMES cares REQUIRED)

# toml++ and spdlog/fmt, header-only.
find_path(GPUPOOL_TOML_INCLUDE toml++/toml.h REQUIRED)
find_path(GPUPOOL_SPDLOG_INCLUDE spdlog/spdlog.h REQUIRED)
find_path(GPUPOOL_FMT_INCLUDE fmt/format.h REQUIRED)
add_library(tomlplusplus::tomlplusplus INTERFACE IMPORTED)
target_include_directories(tomlplusplus::tomlplusplus INTERFACE ${GPUPOOL_TOML_INCLUDE})
target_compile_definitions(tomlplusplus::tomlplusplus INTERFACE TOML_HEADER_ONLY=1)
add_library(spdlog::spdlog INTERFACE IMPORTED)
target_include_directories(spdlog::spdlog INTERFACE ${GPUPOOL_SPDLOG_INCLUDE} ${GPUPOOL_FMT_INCLUDE})
target_compile_definitions(spdlog::spdlog INTERFACE SPDLOG_FMT_EXTERNAL FMT_HEADER_ONLY=1)

# curl and libarchive from .ci/build-static-deps.
find_path(GPUPOOL_CURL_PREFIX include/curl/curl.h PATHS ${GPUPOOL_STATIC_DEPS} NO_DEFAULT_PATH REQUIRED)
find_path(GPUPOOL_ARCHIVE_PREFIX include/archive.h PATHS ${GPUPOOL_STATIC_DEPS} NO_DEFAULT_PATH REQUIRED)
add_library(CURL::libcurl STATIC IMPORTED)
set_target_properties(CURL::libcurl PROPERTIES
  IMPORTED_LOCATION "${GPUPOOL_CURL_PREFIX}/lib/libcurl.a"
  INTERFACE_INCLUDE_DIRECTORIES "${GPUPOOL_CURL_PREFIX}/include"
  INTERFACE_COMPILE_DEFINITIONS CURL_STATICLIB
  INTERFACE_LINK_LIBRARIES "OpenSSL::SSL;OpenSSL::Crypto;${GPUPOOL_CARES_LIBRARY};ZLIB::ZLIB;Threads::Threads")
add_library(LibArchive::LibArchive STATIC IMPORTED)
set_target_properties(LibArchive::LibArchive PROPERTIES
  IMPORTED_LOCATION "${GPUPOOL_ARCHIVE_PREFIX}/lib/libarchive.a"
  INTERFACE_INCLUDE_DIRECTORIES "${GPUPOOL_ARCHIVE_PREFIX}/include"
  INTERFACE_COMPILE_DEFINITIONS LIBARCHIVE_STATIC
  INTERFACE_LINK_LIBRARIES "ZLIB::ZLIB")
find_path(GPUPOOL_PROMETHEUS_PREFIX include/prometheus/registry.h PATHS ${GPUPOOL_STATIC_DEPS} NO_DEFAULT_PATH REQUIRED)
add_library(prometheus-cpp::core STATIC IMPORTED)
set_target_properties(prometheus-cpp::core PROPERTIES
  IMPORTED_LOCATION "${GPUPOOL_PROMETHEUS_PREFIX}/lib/libprometheus-cpp-core.a"
  INTERFACE_INCLUDE_DIRECTORIES "${GPUPOOL_PROMETHEUS_PREFIX}/include"
  INTERFACE_LINK_LIBRARIES "Threads::Threads")

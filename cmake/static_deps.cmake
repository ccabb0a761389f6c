# GPUPOOL_STATIC=ON: the dependency targets the layers link, in forms that make one fully static
# executable (`make static`; docs/static.md). The target names are those of the normal build, so
# core/, worker/ and cmd/ link the same names either way.
#   - Debian's .a files: OpenSSL, SQLite3, SQLiteCpp, zlib, c-ares, Boost.Filesystem/Atomic/URL;
#   - header-only: Boost.Asio/Beast/Process, nlohmann-json, CLI11;
#   - toml++ with its implementation compiled once (gpupool_toml, cmake/toml_implementation.cpp);
#   - curl 7.88.1, libarchive 3.6.2, prometheus-cpp 1.0.1 (core), fmt 9.1.0 and spdlog 1.10.0 built
#     by .ci/build-static-deps from Debian's source packages (GPUPOOL_STATIC_DEPS: their install
#     prefixes). Header-only, spdlog, fmt and toml++ put their implementation into every file that
#     logs or reads TOML (bench/README.md, "Build times").
# Every library is looked up as .a only, so a missing one fails here rather than linking a .so.
set(GPUPOOL_STATIC_DEPS "" CACHE STRING "Install prefixes of the libraries .ci/build-static-deps builds (curl, libarchive, prometheus-cpp, fmt, spdlog)")
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

# toml++ from Debian's headers, its implementation in one file of ours (toml++'s TOML_HEADER_ONLY=0
# mode), so that the other files only declare it.
find_path(GPUPOOL_TOML_INCLUDE toml++/toml.h REQUIRED)
add_library(gpupool_toml STATIC ${CMAKE_CURRENT_LIST_DIR}/toml_implementation.cpp)
target_include_directories(gpupool_toml SYSTEM PUBLIC ${GPUPOOL_TOML_INCLUDE})
target_compile_definitions(gpupool_toml PUBLIC TOML_HEADER_ONLY=0)
add_library(tomlplusplus::tomlplusplus ALIAS gpupool_toml)

# fmt and spdlog as static libraries (their CMake packages, from .ci/build-static-deps only: Debian's
# own are shared).
find_package(fmt 9.1 CONFIG REQUIRED PATHS ${GPUPOOL_STATIC_DEPS} NO_DEFAULT_PATH)
find_package(spdlog 1.10 CONFIG REQUIRED PATHS ${GPUPOOL_STATIC_DEPS} NO_DEFAULT_PATH)

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

# Compiler flags for KV Scope's own targets (never for third-party code, which is only
# ever found with find_package): warnings, -Werror and sanitizers.
#
#   kvscope_build_flags(<target>...)   every add_library / add_executable of this project
#                                      calls it once for its target.
#
# Options (cache variables):
#   KVSCOPE_WERROR    ON: warnings are errors. OFF by default; installer/run_tests.sh (the
#                     README's test command, which CI runs) sets it. Its default here comes
#                     from the environment variable of the same name when that is set.
#   KVSCOPE_SANITIZE  "" (none), "address" (ASan + UBSan, aborting on the first report)
#                     or "thread" (TSan). The CUDA backend library is not built then (see
#                     kernels/CMakeLists.txt). Pair it with an -O1 build, e.g.
#                     -DCMAKE_BUILD_TYPE=Sanitize (-O1 -g1, asserts on), defined below.

if(DEFINED ENV{KVSCOPE_WERROR} AND NOT "$ENV{KVSCOPE_WERROR}" STREQUAL "")
  set(_kvscope_werror_default "$ENV{KVSCOPE_WERROR}")
else()
  set(_kvscope_werror_default OFF)
endif()
option(KVSCOPE_WERROR "Treat warnings in KV Scope's own code as errors" ${_kvscope_werror_default})

set(KVSCOPE_SANITIZE "" CACHE STRING "Sanitizers for every KV Scope target and test: '' (none), address (ASan+UBSan), thread (TSan)")
set_property(CACHE KVSCOPE_SANITIZE PROPERTY STRINGS "" address thread)
if(NOT KVSCOPE_SANITIZE STREQUAL "" AND NOT KVSCOPE_SANITIZE MATCHES "^(address|thread)$")
  message(FATAL_ERROR "KVSCOPE_SANITIZE must be empty, 'address' or 'thread', got '${KVSCOPE_SANITIZE}'")
endif()

# A build type for sanitizer trees: quick to compile, fast enough to run the tests, line
# tables for the reports' file:line, and assert() left on. project() has already created
# these cache entries, empty, when CMAKE_BUILD_TYPE is Sanitize: fill them unless set.
foreach(lang C CXX)
  if(NOT CMAKE_${lang}_FLAGS_SANITIZE)
    set(CMAKE_${lang}_FLAGS_SANITIZE "-O1 -g1" CACHE STRING "${lang} flags of the Sanitize build type" FORCE)
  endif()
endforeach()

set(_kvscope_cxx_warnings -Wall -Wextra -Wshadow)
# GCC 12 (Debian 12's compiler) warns -Wrestrict inside libstdc++ for `"literal" + std::string&&`
# at -O2/-O3, a false positive fixed in GCC 13 (https://gcc.gnu.org/bugzilla/show_bug.cgi?id=105651).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  list(APPEND _kvscope_cxx_warnings -Wno-restrict)
endif()
# nvcc: the same warnings for the host compiler only (-Xcompiler). The CUDA headers come in
# as system headers, and nvcc's generated host stubs are clean under these (checked with
# CUDA 13.0 / GCC 12); nvcc's own front-end warnings stay warnings even with KVSCOPE_WERROR.
set(_kvscope_cuda_warnings -Xcompiler=-Wall,-Wextra,-Wshadow)
if(KVSCOPE_WERROR)
  list(APPEND _kvscope_cxx_warnings -Werror)
  list(APPEND _kvscope_cuda_warnings -Xcompiler=-Werror)
endif()

# KVSCOPE_SANITIZER_TEST_ENV: the run-time options tests/CMakeLists.txt gives every test
# (and the programs they start, which inherit the environment). Qt Test's per-function limit
# (300 s by default) is raised to CTest's 900 s per test: a real-model function runs several
# times slower under a sanitizer (tst_gemma3_engine_window's Gemma 3 chat ran past 300 s under
# ASan on a loaded 2-core machine). allow_addr2line: file:line in reports where
# llvm-symbolizer is not installed. ASan: an allocation over 16 GiB (a size read
# from a corrupt file) fails as std::bad_alloc, as it would under the fuzz test's RLIMIT_AS,
# instead of ending the process.
set(_kvscope_sanitize_flags "")
set(KVSCOPE_SANITIZER_TEST_ENV "")
if(KVSCOPE_SANITIZE STREQUAL "address")
  set(_kvscope_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  set(KVSCOPE_SANITIZER_TEST_ENV
    "QTEST_FUNCTION_TIMEOUT=900000"
    "ASAN_OPTIONS=detect_leaks=1:check_initialization_order=1:strict_string_checks=1:allocator_may_return_null=1:max_allocation_size_mb=16384:allow_addr2line=1"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:allow_addr2line=1")
elseif(KVSCOPE_SANITIZE STREQUAL "thread")
  set(_kvscope_sanitize_flags -fsanitize=thread -fno-omit-frame-pointer)
  set(KVSCOPE_SANITIZER_TEST_ENV
    "QTEST_FUNCTION_TIMEOUT=900000"
    "TSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/tsan.supp:second_deadlock_stack=1:die_after_fork=0:allow_addr2line=1")
endif()

function(kvscope_build_flags)
  foreach(t IN LISTS ARGN)
    target_compile_options(${t} PRIVATE
      "$<$<COMPILE_LANGUAGE:CXX>:${_kvscope_cxx_warnings}>"
      "$<$<COMPILE_LANGUAGE:CUDA>:${_kvscope_cuda_warnings}>")
    if(_kvscope_sanitize_flags)
      target_compile_options(${t} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${_kvscope_sanitize_flags}>")
      target_link_options(${t} PRIVATE ${_kvscope_sanitize_flags})
    endif()
  endforeach()
endfunction()

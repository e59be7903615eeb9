# EPLB_SANITIZE=address builds everything with ASan + UBSan, EPLB_SANITIZE=thread with TSan,
# EPLB_SANITIZE=fuzzer with libFuzzer's instrumentation and ASan + UBSan, and the fuzzers (fuzz/).
# CI builds the test suites once plain, once with each (see tools/test). Only C++ sources take
# the flags: nvcc does not know them, and device code is checked by compute-sanitizer instead.
if(EPLB_SANITIZE STREQUAL "address")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=all>)
  add_link_options(-fsanitize=address,undefined)
elseif(EPLB_SANITIZE STREQUAL "thread")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=thread>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>)
  add_link_options(-fsanitize=thread)
elseif(EPLB_SANITIZE STREQUAL "fuzzer")
  # libFuzzer's coverage instrumentation with ASan + UBSan (clang only); fuzz/ links the fuzzers.
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "EPLB_SANITIZE=fuzzer needs clang (CXX=clang++-14), not ${CMAKE_CXX_COMPILER_ID}")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link,address,undefined>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=all>)
  add_link_options(-fsanitize=address,undefined)
elseif(EPLB_SANITIZE)
  message(FATAL_ERROR
    "EPLB_SANITIZE='${EPLB_SANITIZE}': valid values are 'address', 'thread', 'fuzzer' or empty")
endif()

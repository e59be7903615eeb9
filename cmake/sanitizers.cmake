# EPLB_SANITIZE=address builds everything with ASan + UBSan, EPLB_SANITIZE=thread with TSan.
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
elseif(EPLB_SANITIZE)
  message(FATAL_ERROR "EPLB_SANITIZE='${EPLB_SANITIZE}': valid values are 'address', 'thread' or empty")
endif()

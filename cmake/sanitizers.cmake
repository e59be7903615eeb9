# EPLB_SANITIZE=address builds everything with ASan + UBSan, EPLB_SANITIZE=thread with TSan.
# CI builds the test suites once plain, once with each (see tools/test).
if(EPLB_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
elseif(EPLB_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(EPLB_SANITIZE)
  message(FATAL_ERROR "EPLB_SANITIZE='${EPLB_SANITIZE}': valid values are 'address', 'thread' or empty")
endif()

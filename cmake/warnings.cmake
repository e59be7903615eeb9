# Warnings for our own targets only: third-party headers come in as SYSTEM includes. CUDA
# sources get the host compiler's -Wall through nvcc, and nvcc's own warnings as errors.
add_library(eplb_warnings INTERFACE)
set(EPLB_CXX_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion)
if(EPLB_WERROR)
  list(APPEND EPLB_CXX_WARNINGS -Werror)
endif()
target_compile_options(eplb_warnings INTERFACE
  "$<$<COMPILE_LANGUAGE:CXX>:${EPLB_CXX_WARNINGS}>"
  "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>"
  "$<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${EPLB_WERROR}>>:-Werror=all-warnings>")

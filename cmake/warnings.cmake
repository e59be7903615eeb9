# Warnings for our own targets only: third-party headers come in as SYSTEM includes.
add_library(eplb_warnings INTERFACE)
target_compile_options(eplb_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                                               -Wno-sign-conversion)
if(EPLB_WERROR)
  target_compile_options(eplb_warnings INTERFACE -Werror)
endif()

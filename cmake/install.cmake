# `cmake --install`: the core's headers and layer libraries with an eplbConfig.cmake, so that
# another CMake project can find_package(eplb); the command-line executables (the parts' own in
# libexec/eplb, where `eplb` looks for them) and the viewer.
include(CMakePackageConfigHelpers)

set(EPLB_LAYERS eplb_base eplb_model eplb_policy eplb_migrate eplb_formats eplb_engine eplb_io
                eplb_core)
install(TARGETS ${EPLB_LAYERS} EXPORT eplbTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/core/include/eplb DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT eplbTargets NAMESPACE eplb:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/eplb)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/eplbConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/eplbConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/eplb)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/eplbConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/eplbConfig.cmake ${PROJECT_BINARY_DIR}/eplbConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/eplb)

install(TARGETS eplb RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(t IN LISTS EPLB_CLI_TARGETS)
  if(NOT t STREQUAL "eplb")
    install(TARGETS ${t} RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/eplb)
  endif()
endforeach()
if(TARGET eplb-viewer)
  install(TARGETS eplb-viewer RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# `cmake --install`: the core's headers and layer libraries with an eplbConfig.cmake, so that
# another CMake project can find_package(eplb); the command-line executables (the parts' own in
# libexec/eplb, where `eplb` looks for them) and the viewer.
include(CMakePackageConfigHelpers)

set(EPLB_LAYERS eplb_base eplb_model eplb_policy eplb_migrate eplb_formats eplb_engine eplb_io
                eplb_reports eplb_usecases eplb_core)
install(TARGETS ${EPLB_LAYERS} EXPORT eplbTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# The public headers: what an embedder needs, and everything they include (the install test
# compiles all of them against the installed tree alone). The rest of core/include (the process
# pool, the launcher, the step model, the file formats' internals, the CLI's use cases) is eplb's
# own and is not installed. docs/architecture.md ("The public API") says why each is here.
set(EPLB_PUBLIC_HEADERS
    # The vocabulary: Status and Result, observers, whole-file I/O (load files name it), the
    # enums' name tables (their names in files and errors, and how a quoted input is cut).
    base/status.h base/signal.h base/file_io.h base/name_table.h base/excerpt.h
    # The model: cluster, load, placement and what is measured of them.
    model/topology.h model/load.h model/placement.h model/metrics.h model/slot_preservation.h
    model/survivability.h
    # The policies, by name (policy.h) or called directly.
    policy/policy.h policy/policies.h policy/deepseek.h policy/balance_bound.h policy/optimal.h
    policy/external_policy.h policy/topology_aware.h policy/recorded_policy.h
    # The backend contract and the rearranger that drives it; the host backend, and the helpers
    # every backend shares.
    migrate/backend.h migrate/rearranger.h migrate/transfer_plan.h migrate/schedule.h
    migrate/transfer_record.h migrate/host_backend.h migrate/lost_ranks.h
    migrate/thread_workers.h migrate/engine_profile.h migrate/transport.h
    migrate/migration_pricing.h
    migrate/forwarding_backend.h
    # Running a scenario: its values, its workload, the loop and what a run records.
    engine/scenario.h engine/workload.h engine/eplb_loop.h engine/step_cost.h engine/run_loop.h
    engine/run_result.h
    # The formats: loads, placements, scenario files, run and other output folders; a policy run
    # on a load.
    formats/load_file.h io/placement_files.h io/scenario_file.h
    io/run_folder.h io/output_folders.h io/recorded_placements.h usecases/rebalance.h
    usecases/plan.h)
foreach(header IN LISTS EPLB_PUBLIC_HEADERS)
  get_filename_component(dir ${header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/core/include/eplb/${header}
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/eplb/${dir})
endforeach()

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

# The optional parts (simulator, GPU backend, viewer) each depend on one library that a machine
# may lack. Each part switches itself off, loudly, when its dependency is missing; the core and
# its tests always build. EPLB_PART_SUMMARY collects one word per part for the final status line.
set(EPLB_PART_SUMMARY "")

function(eplb_part name dir enabled found why)
  if(NOT EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/${dir}/CMakeLists.txt")
    message(STATUS "eplb: part '${name}' skipped: ${dir}/ has no sources yet")
    set(EPLB_PART_SUMMARY "${EPLB_PART_SUMMARY} ${name}=not-yet" PARENT_SCOPE)
  elseif(NOT ${enabled})
    message(STATUS "eplb: part '${name}' skipped: switched off (${enabled}=OFF)")
    set(EPLB_PART_SUMMARY "${EPLB_PART_SUMMARY} ${name}=OFF" PARENT_SCOPE)
  elseif(found)
    add_subdirectory(${dir})
    set(EPLB_PART_SUMMARY "${EPLB_PART_SUMMARY} ${name}=ON" PARENT_SCOPE)
  else()
    message(WARNING "eplb: part '${name}' skipped: ${why}")
    set(EPLB_PART_SUMMARY "${EPLB_PART_SUMMARY} ${name}=OFF" PARENT_SCOPE)
  endif()
endfunction()

option(EPLB_WITH_SIM "Build the SimGrid simulator when SimGrid is found" ON)
option(EPLB_WITH_DEVICE "Build the CUDA/NCCL backend when CUDA is found" ON)
option(EPLB_WITH_GUI "Build the Qt viewer when Qt 6 is found" ON)

find_package(PkgConfig QUIET)
set(EPLB_HAVE_SIMGRID OFF)
if(EPLB_WITH_SIM AND PKG_CONFIG_FOUND)
  pkg_check_modules(SIMGRID QUIET IMPORTED_TARGET simgrid>=3.32)
  set(EPLB_HAVE_SIMGRID ${SIMGRID_FOUND})
endif()
eplb_part(sim sim EPLB_WITH_SIM "${EPLB_HAVE_SIMGRID}"
          "SimGrid >= 3.32 not found (apt-get install libsimgrid-dev); eplb run is unavailable")

set(EPLB_HAVE_CUDA OFF)
if(EPLB_WITH_DEVICE)
  # Where these machines keep CUDA, whether or not it is on the PATH.
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(EPLB_HAVE_CUDA ON)
  endif()
endif()
eplb_part(device device EPLB_WITH_DEVICE "${EPLB_HAVE_CUDA}"
          "no CUDA compiler found (expected /usr/local/cuda/bin/nvcc)")

set(EPLB_HAVE_QT OFF)
if(EPLB_WITH_GUI)
  find_package(Qt6 QUIET COMPONENTS Widgets)
  set(EPLB_HAVE_QT ${Qt6_FOUND})
endif()
eplb_part(gui gui EPLB_WITH_GUI "${EPLB_HAVE_QT}" "Qt 6 Widgets not found (apt-get install qt6-base-dev)")

# The Python package: Debian's own interpreter (these machines put a pyenv python3 first on the
# PATH, which has neither numpy nor torch), its headers and pybind11. Sanitizer builds leave it
# out: the extension would need the sanitizer runtime preloaded into python3.
option(EPLB_WITH_PYTHON "Build the Python package when pybind11 and Python 3 headers are found" ON)
set(EPLB_HAVE_PYTHON OFF)
set(EPLB_PYTHON_WHY "pybind11 or the Python 3 headers not found (apt-get install pybind11-dev python3-dev)")
if(EPLB_WITH_PYTHON AND NOT EPLB_SANITIZE STREQUAL "")
  set(EPLB_PYTHON_WHY "sanitizer builds (EPLB_SANITIZE=${EPLB_SANITIZE}) leave it out")
elseif(EPLB_WITH_PYTHON)
  if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python3 QUIET COMPONENTS Interpreter Development.Module)
  if(Python3_FOUND)
    find_package(pybind11 CONFIG QUIET)
    set(EPLB_HAVE_PYTHON ${pybind11_FOUND})
  endif()
endif()
eplb_part(python python EPLB_WITH_PYTHON "${EPLB_HAVE_PYTHON}" "${EPLB_PYTHON_WHY}")

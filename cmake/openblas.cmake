# OpenBLAS, which runs the CPU backend's matrix products (docs/cpu-backend.md).
# Two sources, both found by package name:
#   system: Debian's libopenblas-dev (any distribution's OpenBLAS with a
#           pkg-config file); what C++ engines and the C++ tests link.
#   pypi:   the scipy-openblas32 wheel of the Python running the build; what
#           the Python package links (pyproject.toml), so `pip install .`
#           needs nothing from the system. Its symbols carry the prefix
#           scipy_, so it never clashes with torch's or numpy's BLAS.
#   AUTO:   system when found, else pypi.
# Defines VSA_OPENBLAS_INCLUDE_DIR, VSA_OPENBLAS_LIBRARY (a full path),
# VSA_OPENBLAS_PREFIX (the symbol prefix) and VSA_OPENBLAS_FOUND_AS.
set(VSA_OPENBLAS "AUTO" CACHE STRING "Where OpenBLAS comes from: system, pypi or AUTO")
set_property(CACHE VSA_OPENBLAS PROPERTY STRINGS AUTO system pypi)

function(_vsa_find_system_openblas)
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(_vsa_openblas QUIET openblas)
  endif()
  if(NOT _vsa_openblas_FOUND)
    return()
  endif()
  # The library in pkg-config's own folder, not whichever libblas a plain
  # search would meet first.
  find_library(_vsa_openblas_lib NAMES openblas HINTS ${_vsa_openblas_LIBRARY_DIRS} NO_DEFAULT_PATH NO_CACHE)
  if(_vsa_openblas_lib AND EXISTS "${_vsa_openblas_INCLUDEDIR}/cblas.h")
    set(VSA_OPENBLAS_INCLUDE_DIR "${_vsa_openblas_INCLUDEDIR}" PARENT_SCOPE)
    set(VSA_OPENBLAS_LIBRARY "${_vsa_openblas_lib}" PARENT_SCOPE)
    set(VSA_OPENBLAS_PREFIX "" PARENT_SCOPE)
    set(VSA_OPENBLAS_FOUND_AS "system OpenBLAS ${_vsa_openblas_VERSION}" PARENT_SCOPE)
  endif()
endfunction()

function(_vsa_find_pypi_openblas)
  if(NOT Python_EXECUTABLE)
    find_package(Python 3.9 QUIET COMPONENTS Interpreter)
  endif()
  if(NOT Python_EXECUTABLE)
    return()
  endif()
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c
      "import scipy_openblas32 as s; print(s.get_include_dir()); print(s.get_lib_dir()); print(s.get_library()); print(s.__version__)"
    OUTPUT_VARIABLE _vsa_out RESULT_VARIABLE _vsa_status ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _vsa_status EQUAL 0)
    return()
  endif()
  string(REPLACE "\n" ";" _vsa_out "${_vsa_out}")
  list(GET _vsa_out 0 _vsa_include)
  list(GET _vsa_out 1 _vsa_libdir)
  list(GET _vsa_out 2 _vsa_name)
  list(GET _vsa_out 3 _vsa_version)
  find_library(_vsa_openblas_lib NAMES ${_vsa_name} HINTS "${_vsa_libdir}" NO_DEFAULT_PATH NO_CACHE)
  if(_vsa_openblas_lib)
    set(VSA_OPENBLAS_INCLUDE_DIR "${_vsa_include}" PARENT_SCOPE)
    set(VSA_OPENBLAS_LIBRARY "${_vsa_openblas_lib}" PARENT_SCOPE)
    set(VSA_OPENBLAS_PREFIX "scipy_" PARENT_SCOPE)
    set(VSA_OPENBLAS_FOUND_AS "scipy-openblas32 ${_vsa_version} (PyPI)" PARENT_SCOPE)
  endif()
endfunction()

if(VSA_OPENBLAS STREQUAL "system" OR VSA_OPENBLAS STREQUAL "AUTO")
  _vsa_find_system_openblas()
endif()
if(NOT VSA_OPENBLAS_LIBRARY AND (VSA_OPENBLAS STREQUAL "pypi" OR VSA_OPENBLAS STREQUAL "AUTO"))
  _vsa_find_pypi_openblas()
endif()
if(NOT VSA_OPENBLAS_LIBRARY)
  message(FATAL_ERROR
    "vsa: OpenBLAS (VSA_OPENBLAS=${VSA_OPENBLAS}) not found. The CPU backend's matrix products need it: "
    "install Debian's libopenblas-dev and pkg-config (scripts/install_system_deps.sh does), "
    "or `pip install scipy-openblas32` for the Python interpreter CMake uses.")
endif()
message(STATUS "vsa: OpenBLAS: ${VSA_OPENBLAS_FOUND_AS} (${VSA_OPENBLAS_LIBRARY})")

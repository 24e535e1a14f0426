# OpenBLAS, which runs the CPU backend's matrix products (docs/cpu-backend.md).
# Two flavors, found by vsaFindOpenBLAS.cmake (which says how):
#   system: Debian's libopenblas-dev (any distribution's OpenBLAS with a
#           pkg-config file); what C++ engines and the C++ tests link.
#   pypi:   the scipy-openblas32 wheel of the Python running the build; what
#           the Python package links (pyproject.toml), so `pip install .`
#           needs nothing from the system. Its symbols carry the prefix
#           scipy_, so it never clashes with torch's or numpy's BLAS.
#   AUTO:   system when found, else pypi.
# Imports vsa::openblas (the library) and defines VSA_OPENBLAS_FLAVOR (system
# or pypi: the installed package looks for the same one), VSA_OPENBLAS_LIBRARY,
# VSA_OPENBLAS_INCLUDE_DIR and VSA_OPENBLAS_PREFIX (the symbol prefix).
set(VSA_OPENBLAS "AUTO" CACHE STRING "Where OpenBLAS comes from: system, pypi or AUTO")
set_property(CACHE VSA_OPENBLAS PROPERTY STRINGS AUTO system pypi)
include(${CMAKE_CURRENT_LIST_DIR}/vsaFindOpenBLAS.cmake)

set(VSA_OPENBLAS_FLAVOR "")
foreach(flavor IN ITEMS system pypi)
  if(NOT VSA_OPENBLAS_FLAVOR AND VSA_OPENBLAS MATCHES "^(AUTO|${flavor})$")
    vsa_find_openblas(${flavor})
    # The build compiles against cblas.h too, which only pkg-config or the
    # wheel locates.
    if(VSA_OPENBLAS_LIBRARY AND EXISTS "${VSA_OPENBLAS_INCLUDE_DIR}/cblas.h")
      set(VSA_OPENBLAS_FLAVOR ${flavor})
    endif()
  endif()
endforeach()
if(NOT VSA_OPENBLAS_FLAVOR)
  message(FATAL_ERROR
    "vsa: OpenBLAS (VSA_OPENBLAS=${VSA_OPENBLAS}) not found. The CPU backend's matrix products need it: "
    "install Debian's libopenblas-dev and pkg-config (scripts/install_system_deps.sh does), "
    "or `pip install scipy-openblas32` for the Python that Python_EXECUTABLE names (else python3 on the PATH).")
endif()
set(VSA_OPENBLAS_PREFIX "")
if(VSA_OPENBLAS_FLAVOR STREQUAL "pypi")
  set(VSA_OPENBLAS_PREFIX scipy_)
endif()
add_library(vsa::openblas UNKNOWN IMPORTED)
set_target_properties(vsa::openblas PROPERTIES IMPORTED_LOCATION "${VSA_OPENBLAS_LIBRARY}")
message(STATUS "vsa: OpenBLAS: ${VSA_OPENBLAS_FOUND_AS} (${VSA_OPENBLAS_LIBRARY})")

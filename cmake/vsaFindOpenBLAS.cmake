# Finds the OpenBLAS of one flavor for vsa's CPU backend. Both vsa's build
# (openblas.cmake) and projects that link the installed vsa (vsaConfig.cmake,
# beside which this file is installed) call it: libvsa.a is static, so each
# consumer links OpenBLAS itself and has to find it on its own machine, the
# way the build found it, not at the path the build machine had.
#
#   vsa_find_openblas(<system|pypi> [<folder>...])
#
#   system  any OpenBLAS with the plain cblas_ symbols (Debian's
#           libopenblas-dev): libopenblas in the folder pkg-config gives for
#           `openblas`, else in CMake's default search paths.
#   pypi    the scipy-openblas32 wheel. Its symbols carry the prefix scipy_,
#           so only its libscipy_openblas will do: in the lib folder of the
#           wheel that Python_EXECUTABLE (else python3 on the PATH) imports,
#           else in CMake's default search paths.
# The folders given are searched after pkg-config's or the wheel's and before
# the default paths. VSA_OPENBLAS_LIBRARY_DIR, when set, is the only folder
# searched: the library a user points at is the one linked, or none is.
#
# Sets VSA_OPENBLAS_LIBRARY (the library's full path; false when not found),
# VSA_OPENBLAS_INCLUDE_DIR (cblas.h's folder as pkg-config or the wheel says,
# else empty; only the build compiles against it) and VSA_OPENBLAS_FOUND_AS
# (what was found, for messages).
function(vsa_find_openblas flavor)
  set(folders "")
  set(include "")
  set(version "")
  if(flavor STREQUAL "system")
    set(name openblas)
    set(about "system OpenBLAS")
    find_package(PkgConfig QUIET)
    if(PKG_CONFIG_FOUND)
      pkg_check_modules(_vsa_openblas QUIET openblas)
    endif()
    if(_vsa_openblas_FOUND)
      set(folders ${_vsa_openblas_LIBRARY_DIRS})
      set(include "${_vsa_openblas_INCLUDEDIR}")
      set(version " ${_vsa_openblas_VERSION}")
    endif()
  elseif(flavor STREQUAL "pypi")
    set(name scipy_openblas)
    set(about "scipy-openblas32")
    if(Python_EXECUTABLE)
      set(_vsa_python "${Python_EXECUTABLE}")
    else()
      find_program(_vsa_python NAMES python3 python NO_CACHE)
    endif()
    if(_vsa_python)
      execute_process(
        COMMAND "${_vsa_python}" -c
          "import scipy_openblas32 as s; print(s.get_include_dir()); print(s.get_lib_dir()); print(s.get_library()); print(s.__version__)"
        OUTPUT_VARIABLE out RESULT_VARIABLE status ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
      if(status EQUAL 0)
        string(REPLACE "\n" ";" out "${out}")
        list(GET out 0 include)
        list(GET out 1 folders)
        list(GET out 2 name)
        list(GET out 3 version)
        set(version " ${version}")
      endif()
    endif()
  else()
    message(FATAL_ERROR "vsa_find_openblas: flavor '${flavor}' is neither system nor pypi")
  endif()

  if(VSA_OPENBLAS_LIBRARY_DIR)
    find_library(_vsa_openblas_library NAMES ${name} PATHS "${VSA_OPENBLAS_LIBRARY_DIR}" NO_DEFAULT_PATH NO_CACHE)
    set(version "")  # pkg-config's or the wheel's, not this library's
  else()
    find_library(_vsa_openblas_library NAMES ${name} HINTS ${folders} ${ARGN} NO_CACHE)
  endif()
  set(VSA_OPENBLAS_LIBRARY "${_vsa_openblas_library}" PARENT_SCOPE)
  set(VSA_OPENBLAS_INCLUDE_DIR "${include}" PARENT_SCOPE)
  set(VSA_OPENBLAS_FOUND_AS "${about}${version}" PARENT_SCOPE)
endfunction()

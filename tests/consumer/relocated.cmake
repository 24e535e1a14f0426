# CTest "install.relocated" (cmake -P): the installed package used from a
# copy in another prefix, as on a machine other than the one that built it.
# Installs BUILD_DIR into WORK/installed, copies that to WORK/moved and
# removes the original, then builds and runs the consumer (CMakeLists.txt
# here) against the copy. The other machine need not have the build's
# OpenBLAS folder (OPENBLAS_BUILD_DIR), so wherever the copy's CMake files name
# that folder they name one that does not exist: the consumer has to find
# OpenBLAS itself. VERSION and EXAMPLE_SOURCE go to the consumer as in
# install.consumer.
file(REMOVE_RECURSE "${WORK}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${WORK}/installed"
                OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
file(COPY "${WORK}/installed/" DESTINATION "${WORK}/moved")
file(REMOVE_RECURSE "${WORK}/installed")

file(GLOB package_files "${WORK}/moved/lib/cmake/vsa/*.cmake")
foreach(package_file IN LISTS package_files)
  file(READ "${package_file}" text)
  string(REPLACE "${OPENBLAS_BUILD_DIR}" "/nonexistent/build-machine-openblas" text "${text}")
  file(WRITE "${package_file}" "${text}")
endforeach()

execute_process(COMMAND "${CMAKE_COMMAND}" -S "${CMAKE_CURRENT_LIST_DIR}" -B "${WORK}/build" -G Ninja
                        "-DCMAKE_PREFIX_PATH=${WORK}/moved" "-DVSA_REQUIRED_VERSION=${VERSION}"
                        "-DVSA_EXAMPLE_SOURCE=${EXAMPLE_SOURCE}"
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK}/build" COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND "${WORK}/build/forward_example" COMMAND_ERROR_IS_FATAL ANY)

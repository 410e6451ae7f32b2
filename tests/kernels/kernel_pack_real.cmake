# sabre kernels pack with the real nvcc on one quick sm80 kernel: the first run builds it into the
# cache (one .so under its key), the second finds it there and builds nothing.
# cmake -DSABRE=... -DKERNEL=... -DWORK=... -P kernel_pack_real.cmake
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
file(WRITE "${WORK}/list.txt" "# one quick kernel\n${KERNEL}\n")
foreach(_run first second)
  execute_process(COMMAND "${SABRE}" kernels pack --list "${WORK}/list.txt" --cache-dir "${WORK}/cache" -j 1
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  if(_run STREQUAL "first")
    set(_want "1 built, 0 cached, 0 failed")
  else()
    set(_want "0 built, 1 cached, 0 failed")
  endif()
  if(NOT _rc EQUAL 0 OR NOT _out MATCHES "${_want}")
    message(FATAL_ERROR "${_run} pack run: exit ${_rc}, expected '${_want}':\n${_out}\n${_err}")
  endif()
  message(STATUS "${_run} run: ${_out}")
endforeach()
file(GLOB _libs "${WORK}/cache/${KERNEL}-*.so")
list(LENGTH _libs _n)
if(NOT _n EQUAL 1)
  message(FATAL_ERROR "expected one ${KERNEL}-KEY.so in the cache, found ${_n}: ${_libs}")
endif()

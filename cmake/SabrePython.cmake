# The Python package `sabre` (python/sabre/, extension module sabre._sabre from python/src/),
# built when Python 3 with its headers and pybind11 are found; else a visible message and a test
# that reports skipped. The package is assembled in ${CMAKE_BINARY_DIR}/python (the tests import it
# from there); `pip install .` builds it through scikit-build-core (pyproject.toml), and a build in
# a clone whose .venv is its own adds that folder to the venv (SABRE_PYTHON_INTO_VENV).
# Tests: tests/python/.
set(_venv_py "${CMAKE_SOURCE_DIR}/.venv/bin/python")
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS "${_venv_py}" AND NOT SKBUILD)
  set(Python3_EXECUTABLE "${_venv_py}")  # the project venv's interpreter: the one the tests use
endif()
find_package(Python3 3.9 COMPONENTS Interpreter Development.Module)
if(Python3_FOUND)
  find_package(pybind11 2.10 CONFIG)
endif()

set(_py_tests python.api python.gpu)
if(NOT (Python3_FOUND AND pybind11_FOUND))
  set(_why "the Python package is not built: needs Python 3 with headers (python3-dev) and pybind11 (pybind11-dev); run scripts/setup.sh")
  message(STATUS "${_why}")
  if(SABRE_TESTS)
    foreach(_t ${_py_tests})
      sabre_skipped_test(${_t} unit "${_why}")
    endforeach()
  endif()
  return()
endif()
message(STATUS "Python package sabre: built for ${Python3_EXECUTABLE} (${Python3_VERSION})")

file(GLOB _py_ext_srcs CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/python/src/*.cpp")
pybind11_add_module(sabre_python MODULE ${_py_ext_srcs})
target_link_libraries(sabre_python PRIVATE sabre_codegen sabre_onnx sabre_partition sabre_transform sabre_cutlass
                      sabre_tune sabre_runtime)
target_include_directories(sabre_python PRIVATE "${CMAKE_SOURCE_DIR}/python/src")
# The static libraries' symbols stay inside the module (no clash with another sabre or CUDA runtime).
target_link_options(sabre_python PRIVATE "LINKER:--exclude-libs,ALL")
set(_py_pkg "${CMAKE_BINARY_DIR}/python/sabre")
set_target_properties(sabre_python PROPERTIES OUTPUT_NAME _sabre LIBRARY_OUTPUT_DIRECTORY "${_py_pkg}")
# The pure-Python files beside it, copied on every build so an edit shows without reconfiguring.
file(GLOB _py_files CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/python/sabre/*.py")
set(_py_copied "")
foreach(_f ${_py_files})
  get_filename_component(_n "${_f}" NAME)
  add_custom_command(OUTPUT "${_py_pkg}/${_n}" COMMAND ${CMAKE_COMMAND} -E copy "${_f}" "${_py_pkg}/${_n}"
                     DEPENDS "${_f}" COMMENT "python/sabre/${_n}")
  list(APPEND _py_copied "${_py_pkg}/${_n}")
endforeach()
add_custom_target(sabre_python_files ALL DEPENDS ${_py_copied})
add_dependencies(sabre_python sabre_python_files)

if(SKBUILD)
  # pip install . (scikit-build-core): the wheel takes python/sabre/*.py itself; the module goes beside them.
  install(TARGETS sabre_python LIBRARY DESTINATION sabre COMPONENT python)
else()
  set(_site "${CMAKE_INSTALL_LIBDIR}/python${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}/site-packages/sabre")
  install(TARGETS sabre_python LIBRARY DESTINATION "${_site}" COMPONENT python)
  install(FILES ${_py_files} DESTINATION "${_site}" COMPONENT python)
endif()

# The project venv sees the package of this build through a .pth file, where the venv is this
# clone's own (a symlink to another tree's venv is left alone: that tree's build owns it). It is
# written when the module is built, so a configure-only tree (the sanitized fuzz build) leaves it be.
set(_venv_site "${CMAKE_SOURCE_DIR}/.venv/lib/python${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}/site-packages")
set(_venv_default OFF)
if(NOT SKBUILD AND Python3_EXECUTABLE STREQUAL _venv_py AND IS_DIRECTORY "${_venv_site}"
   AND NOT IS_SYMLINK "${CMAKE_SOURCE_DIR}/.venv")
  set(_venv_default ON)
endif()
option(SABRE_PYTHON_INTO_VENV "Make the project .venv import sabre from this build" ${_venv_default})
if(SABRE_PYTHON_INTO_VENV)
  file(WRITE "${CMAKE_BINARY_DIR}/python/sabre-build.pth" "${CMAKE_BINARY_DIR}/python\n")
  add_custom_command(TARGET sabre_python POST_BUILD
                     COMMAND ${CMAKE_COMMAND} -E copy "${CMAKE_BINARY_DIR}/python/sabre-build.pth" "${_venv_site}/"
                     COMMENT "the project .venv imports sabre from ${CMAKE_BINARY_DIR}/python")
  message(STATUS "Python package: the build makes .venv import sabre from ${CMAKE_BINARY_DIR}/python")
endif()

if(SABRE_TESTS)
  # CPU parts: compile --plan-only, inspect and partition objects, errors, load without a GPU.
  add_test(NAME python.api COMMAND "${Python3_EXECUTABLE}" "${CMAKE_SOURCE_DIR}/tests/python/test_api.py"
                                   "${CMAKE_BINARY_DIR}/tests/python_work")
  # On a GPU: compile a small model, run it on torch CUDA tensors without copies, compare with the reference.
  add_test(NAME python.gpu COMMAND "${Python3_EXECUTABLE}" "${CMAKE_SOURCE_DIR}/tests/python/test_gpu.py"
                                   "${CMAKE_BINARY_DIR}/tests/python_gpu_work")
  set_tests_properties(python.api PROPERTIES LABELS unit TIMEOUT 300
                       ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;SABRE_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
  set_tests_properties(python.gpu PROPERTIES LABELS gpu TIMEOUT 900 SKIP_RETURN_CODE 77
                       ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;SABRE_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endif()

# The shared runtime library libsabre_runtime.so (the runtime only: src/runtime and what it needs
# below it, never the compiler), its install rules, the CMake package (find_package(sabre) ->
# sabre::runtime) and the pkg-config file sabre.pc. Included at the end of the top CMakeLists.txt.
# Tests: tests/install/ (the library's contents, and a consumer built against the installed package).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# sabre.h takes DLPack's DLTensor (Debian libdlpack-dev).
find_path(SABRE_DLPACK_INCLUDE_DIR dlpack/dlpack.h REQUIRED DOC "directory holding dlpack/dlpack.h (libdlpack-dev)")
target_include_directories(sabre_runtime PUBLIC "${SABRE_DLPACK_INCLUDE_DIR}")
target_compile_definitions(sabre_runtime PRIVATE SABRE_VERSION_STRING="${PROJECT_VERSION}")

# Every object of the static sabre_runtime, plus what those objects use from the layers below it
# (support, the native kernels, the static CUDA runtime). --no-undefined makes a symbol from a
# layer the runtime must not link a link error; the version script exports the C and C++ APIs only.
set(_so_src "${CMAKE_BINARY_DIR}/generated/sabre_runtime_so.cpp")
file(WRITE "${_so_src}.tmp" "// Made by CMake: libsabre_runtime.so's objects all come from the static sabre_runtime.\n")
configure_file("${_so_src}.tmp" "${_so_src}" COPYONLY)
add_library(sabre_runtime_shared SHARED "${_so_src}")
add_library(sabre::runtime ALIAS sabre_runtime_shared)
target_link_libraries(sabre_runtime_shared PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,sabre_runtime>")
target_link_options(sabre_runtime_shared PRIVATE "LINKER:--no-undefined"
                    "LINKER:--version-script=${CMAKE_SOURCE_DIR}/cmake/sabre_runtime.map")
set_property(TARGET sabre_runtime_shared APPEND PROPERTY LINK_DEPENDS "${CMAKE_SOURCE_DIR}/cmake/sabre_runtime.map")
set_target_properties(sabre_runtime_shared PROPERTIES
  OUTPUT_NAME sabre_runtime EXPORT_NAME runtime
  VERSION "${PROJECT_VERSION}"
  # 0.x: any minor release may change the ABI, so the SONAME carries MAJOR.MINOR.
  SOVERSION "${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}")
target_include_directories(sabre_runtime_shared INTERFACE
  "$<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>" "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
set(SABRE_PC_EXTRA_CFLAGS "")
if(NOT SABRE_DLPACK_INCLUDE_DIR IN_LIST CMAKE_C_IMPLICIT_INCLUDE_DIRECTORIES)
  # DLPack outside the compiler's default paths (the GPU host's unpacked .debs): consumers need it too.
  target_include_directories(sabre_runtime_shared INTERFACE "${SABRE_DLPACK_INCLUDE_DIR}")
  set(SABRE_PC_EXTRA_CFLAGS " -I${SABRE_DLPACK_INCLUDE_DIR}")
endif()

install(TARGETS sabre_runtime_shared EXPORT sabreTargets
        LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT runtime NAMELINK_COMPONENT dev)
install(FILES include/sabre/sabre.h include/sabre/session.h include/sabre/kernel_abi.h
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/sabre" COMPONENT dev)
install(EXPORT sabreTargets NAMESPACE sabre:: DESTINATION "${CMAKE_INSTALL_LIBDIR}/cmake/sabre" COMPONENT dev)
configure_package_config_file(cmake/sabreConfig.cmake.in "${CMAKE_BINARY_DIR}/cmake/sabreConfig.cmake"
                              INSTALL_DESTINATION "${CMAKE_INSTALL_LIBDIR}/cmake/sabre")
# 0.x: a consumer built against 0.16 wants 0.16.
write_basic_package_version_file("${CMAKE_BINARY_DIR}/cmake/sabreConfigVersion.cmake" COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_BINARY_DIR}/cmake/sabreConfig.cmake" "${CMAKE_BINARY_DIR}/cmake/sabreConfigVersion.cmake"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/cmake/sabre" COMPONENT dev)
# sabre.pc finds its prefix from its own place, so the installed tree can move.
file(RELATIVE_PATH SABRE_PC_PREFIX_FROM_PCDIR "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" SABRE_PC_PREFIX_FROM_PCDIR "${SABRE_PC_PREFIX_FROM_PCDIR}")
configure_file(cmake/sabre.pc.in "${CMAKE_BINARY_DIR}/cmake/sabre.pc" @ONLY)
install(FILES "${CMAKE_BINARY_DIR}/cmake/sabre.pc" DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig" COMPONENT dev)
# The command-line tool (the compiler) installs beside it, as its own component.
install(TARGETS sabre RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT cli)

if(SABRE_TESTS)
  # What the library holds and links: no compiler layer, no ONNX/protobuf/SQLite, only the APIs exported.
  add_test(NAME install.runtime_lib
           COMMAND sh "${CMAKE_SOURCE_DIR}/tests/install/check_runtime_lib.sh" $<TARGET_FILE:sabre_runtime_shared>
                   "${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}")
  set_tests_properties(install.runtime_lib PROPERTIES LABELS unit TIMEOUT 60)
  # cmake --install into a temporary prefix, then examples/run_artifact built against it through
  # find_package(sabre) and through pkg-config, and run on a --plan-only artifact (label cli: it
  # installs, configures and builds a project).
  add_test(NAME install.consumer
           COMMAND sh "${CMAKE_SOURCE_DIR}/tests/install/check_consumer.sh" "${CMAKE_BINARY_DIR}"
                   "${CMAKE_CURRENT_BINARY_DIR}/tests/install_work" $<TARGET_FILE:sabre>
                   "${CMAKE_SOURCE_DIR}/tests/install/softmax.onnx")
  set_tests_properties(install.consumer PROPERTIES LABELS cli TIMEOUT 600 SKIP_RETURN_CODE 77)
endif()
if(TARGET sabre_unit_tests)
  # tests/unit/runtime_capi_test.cpp checks sabre_version() against the project's version.
  target_compile_definitions(sabre_unit_tests PRIVATE SABRE_PROJECT_VERSION="${PROJECT_VERSION}")
endif()

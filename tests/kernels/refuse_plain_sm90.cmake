# Emits an sm90 kernel and compiles it for plain sm_90: the build must fail with the emitted #error.
set(name sm90_ws_coop_tn_f16_f16_f32_128x128x64_c1x1_a8_bias)
file(MAKE_DIRECTORY ${WORK})
execute_process(COMMAND ${SABRE} kernels emit ${name} -o ${WORK}/${name}.cu RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "sabre kernels emit failed (${rc})")
endif()
execute_process(COMMAND ${NVCC} -std=c++17 --expt-relaxed-constexpr -gencode arch=compute_90,code=sm_90
                        -I${CUTLASS_DIR}/include -I${SABRE_INCLUDE} -c ${WORK}/${name}.cu -o ${WORK}/${name}.o
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "a plain sm_90 build of ${name} succeeded; it must fail")
endif()
string(FIND "${out}${err}" "sm90 kernels need -gencode arch=compute_90a,code=sm_90a" pos)
if(pos EQUAL -1)
  message(FATAL_ERROR "the plain sm_90 build failed, but not with sabre's #error:\n${out}${err}")
endif()
message(STATUS "plain sm_90 build refused as it should be")

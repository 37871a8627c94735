# ctest install_consumer: `cmake --install` of the build tree into WORK/prefix, then the project
# in this folder configured against it with find_package(fplab), built, and run; its line must
# say what fplab computes. Run as: cmake -DBUILD=<fplab build> -DWORK=<scratch folder> -P check.cmake
foreach(var BUILD WORK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_consumer: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK})
set(prefix ${WORK}/prefix)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "install_consumer: `${ARGN}` failed (${status}):\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix})
foreach(expected bin/fplab include/fplab/fp/format.hpp include/fplab/profiles/hw_profile.hpp
                 share/fplab/profiles/h100.toml lib/cmake/fplab/fplabConfig.cmake)
  if(NOT EXISTS ${prefix}/${expected})
    message(FATAL_ERROR "install_consumer: ${expected} was not installed")
  endif()
endforeach()
run(${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR} -B ${WORK}/build -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK}/build)
run(${WORK}/build/consumer)
set(expected "bf16(1/3)=0x1.56p-2 seq=0x1.000002p+0 rev=0x1p+0 profile=h100\n")
if(NOT out STREQUAL expected)
  message(FATAL_ERROR "install_consumer: the program printed\n  ${out}instead of\n  ${expected}")
endif()
message(STATUS "install_consumer: ${out}")

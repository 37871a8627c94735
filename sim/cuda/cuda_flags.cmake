# The compile settings of every folder with CUDA sources (sim/cuda/, tools/gpu/): included by
# their CMakeLists.txt, so that the kernels of both are built alike (the SASS check reads both).
find_package(CUDAToolkit REQUIRED)

# The root's warning and fp flags are for the host compiler; nvcc takes them through -Xcompiler.
set_property(DIRECTORY PROPERTY COMPILE_OPTIONS "")
add_compile_options(
  "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wno-unknown-pragmas;-ffp-contract=off;-fno-fast-math>"
  "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${FPLAB_NATIVE}>>:-march=native>"
  "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-ffp-contract=off,-fno-fast-math>"
  # IEEE fp32 on the device: no FMA contraction, subnormals kept, correctly rounded div/sqrt.
  "$<$<COMPILE_LANGUAGE:CUDA>:-fmad=false;-ftz=false;-prec-div=true;-prec-sqrt=true>")

# CUDA sources take the project's C++20 (std::span in the headers); CMake 3.25 does not know
# nvcc's flag for it, nvcc 12 and later have it.
if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)

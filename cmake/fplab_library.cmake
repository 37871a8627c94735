# How a folder of fplab becomes a library: fplab_library(NAME FOLDER source...) makes the target
# fplab_NAME, its alias fplab::NAME (installed and exported under the same name) and gives it its
# folder as its only include root.
#
# Every source includes headers by their folder ("sim/schedule.hpp"). Rather than put the whole
# source tree on the include path, each folder gets a root of its own in the build tree
# (include_roots/sim/sim -> <source>/sim), and a library sees the roots of what it links: a lower
# folder that includes a higher one ("fp/" including "sim/...") fails to compile instead of
# quietly depending upwards. docs/architecture.md lists the layers.
include_guard(GLOBAL)
include(GNUInstallDirs)

# fplab_include_root(TARGET FOLDER [INTERFACE|PUBLIC|PRIVATE]): TARGET may include FOLDER's headers
# as "FOLDER/name.hpp". FOLDER may be nested ("sim/cuda", "tools/gpu").
function(fplab_include_root target folder)
  set(scope PUBLIC)
  if(ARGC GREATER 2)
    set(scope ${ARGV2})
  endif()
  string(REPLACE "/" "_" root_name "${folder}")
  set(root ${PROJECT_BINARY_DIR}/include_roots/${root_name})
  get_filename_component(parent "${root}/${folder}" DIRECTORY)
  file(MAKE_DIRECTORY "${parent}")
  file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${folder}" "${root}/${folder}" SYMBOLIC)
  target_include_directories(${target} ${scope} $<BUILD_INTERFACE:${root}>
                             $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/fplab>)
endfunction()

function(fplab_library name folder)
  add_library(fplab_${name} ${ARGN})
  add_library(fplab::${name} ALIAS fplab_${name})
  set_target_properties(fplab_${name} PROPERTIES EXPORT_NAME ${name})
  fplab_include_root(fplab_${name} ${folder})
endfunction()

# What `cmake --install` puts under the prefix:
#   bin/fplab
#   lib/libfplab_*.a                         the layers (util, fp, fp_reference, sim, profiles,
#                                            models, experiments)
#   include/fplab/<folder>/*.hpp             their headers, included as "fp/format.hpp" etc.
#   share/fplab/profiles/*.toml              the shipped hardware profiles (also built into fplab)
#   lib/cmake/fplab/                         fplabConfig.cmake: find_package(fplab) -> fplab::fp, ...
# The GPU kernels, the LibTorch twin and the tools are build-tree only.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(FPLAB_INSTALLED_LAYERS util fp fp_reference sim profiles models experiments)
set(targets "")
foreach(layer ${FPLAB_INSTALLED_LAYERS})
  list(APPEND targets fplab_${layer})
endforeach()
install(TARGETS ${targets} EXPORT fplabTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET fplab)
  install(TARGETS fplab RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
foreach(folder util fp sim profiles models experiments)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${folder}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fplab/${folder}
          FILES_MATCHING PATTERN "*.hpp" PATTERN "cuda" EXCLUDE PATTERN "torch" EXCLUDE PATTERN "shipped" EXCLUDE)
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/profiles/shipped/ DESTINATION ${CMAKE_INSTALL_DATADIR}/fplab/profiles
        FILES_MATCHING PATTERN "*.toml")

set(config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/fplab)
install(EXPORT fplabTargets NAMESPACE fplab:: DESTINATION ${config_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/fplabConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/fplabConfig.cmake INSTALL_DESTINATION ${config_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/fplabConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/fplabConfig.cmake ${PROJECT_BINARY_DIR}/fplabConfigVersion.cmake
        DESTINATION ${config_dir})

# `cmake --install` rules: the public headers (include/stave), the library as libstave.so (the
# objects of the static `stave` target linked into one shared library, so consumers need none
# of stave's private dependencies), the CLI, a CMake package (find_package(stave CONFIG) ->
# stave::stave) and a pkg-config file (stave.pc). tests/install/examples.sh builds examples/
# against an installed tree.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

add_library(stave_shared SHARED $<TARGET_OBJECTS:stave>)
set_target_properties(stave_shared PROPERTIES
  OUTPUT_NAME stave
  EXPORT_NAME stave
  LINKER_LANGUAGE CXX  # objects only: say how to link (the CUDA build adds .cu objects)
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
target_include_directories(stave_shared PUBLIC
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(stave_shared PUBLIC cxx_std_20)
if(STAVE_CUDA)
  find_package(CUDAToolkit REQUIRED)  # its imported targets are local to the folder that found them
endif()
# What `stave` links, all private here: the public headers use the standard library only.
get_target_property(_stave_links stave LINK_LIBRARIES)
target_link_libraries(stave_shared PRIVATE ${_stave_links})

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/stave DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS stave_shared EXPORT staveTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS stave_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(STAVE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/stave)
install(EXPORT staveTargets NAMESPACE stave:: DESTINATION ${STAVE_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/staveConfig.cmake.in
  ${PROJECT_BINARY_DIR}/staveConfig.cmake INSTALL_DESTINATION ${STAVE_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/staveConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/staveConfig.cmake ${PROJECT_BINARY_DIR}/staveConfigVersion.cmake
  DESTINATION ${STAVE_CMAKE_DIR})

# pkg-config: paths relative to the .pc file, so `cmake --install --prefix P` anywhere works.
file(RELATIVE_PATH STAVE_PC_PREFIX "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
configure_file(${PROJECT_SOURCE_DIR}/cmake/stave.pc.in ${PROJECT_BINARY_DIR}/stave.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/stave.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The image-decoding fuzz target (fuzz/fuzz_image.cpp). fuzz/CMakeLists.txt builds every
# fuzz_*.cpp already; this file is for a CMakeLists that lists targets explicitly: include() it
# after the sanitizer flags are set. It does nothing when fuzz_image already exists.
if(NOT TARGET fuzz_image)
  add_executable(fuzz_image ${CMAKE_CURRENT_LIST_DIR}/fuzz_image.cpp)
  target_link_libraries(fuzz_image PRIVATE stave_internal)
  target_compile_options(fuzz_image PRIVATE -fsanitize=fuzzer ${STAVE_FUZZ_SANITIZERS})
  target_link_options(fuzz_image PRIVATE -fsanitize=fuzzer ${STAVE_FUZZ_SANITIZERS})
  set_target_properties(fuzz_image PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/fuzz)
endif()

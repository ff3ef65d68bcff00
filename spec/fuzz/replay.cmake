# SPDX-License-Identifier: MIT
# Included by the main CMakeLists.txt (with ATTN_BUILD_TESTS): every fuzz
# target of spec/fuzz/ built with replay_main.c instead of libFuzzer, by
# whatever compiler builds attn, and one ctest test per target replaying
# its committed corpus spec/fuzz/corpus/<target>/ (seeds, inputs that
# found bugs, coverage the fuzzer reached).  A target aborts on a wrong
# result, so each input ever committed stays a regression test; under
# ATTN_SANITIZE the replay runs with ASan and UBSan.  Fuzzing itself is
# scripts/fuzz.sh (clang, libFuzzer, build-fuzz/).
include(${CMAKE_CURRENT_LIST_DIR}/targets.cmake)
set(FUZZ_DIR ${CMAKE_CURRENT_LIST_DIR})

set(FUZZ_REPLAY_DRIVER_C ${CMAKE_BINARY_DIR}/generated/fuzz_lua_driver.c)
add_custom_command(OUTPUT ${FUZZ_REPLAY_DRIVER_C}
  COMMAND ${CMAKE_COMMAND} -DOUT=${FUZZ_REPLAY_DRIVER_C} -DSRC=${FUZZ_DIR}/lua_api.lua
          -P ${FUZZ_DIR}/embed_driver.cmake
  DEPENDS ${FUZZ_DIR}/lua_api.lua ${FUZZ_DIR}/embed_driver.cmake)

foreach(name IN LISTS FUZZ_CORE_TARGETS FUZZ_LUA_TARGETS)
  add_executable(replay_${name} ${FUZZ_DIR}/${name}.c ${FUZZ_DIR}/replay_main.c)
  target_include_directories(replay_${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/src/core
    ${CJSON_INCLUDE_DIRS} ${ZLIB_INCLUDE_DIRS})
  if(name IN_LIST FUZZ_LUA_TARGETS)
    target_link_libraries(replay_${name} PRIVATE attn_lua_static)
  else()
    target_link_libraries(replay_${name} PRIVATE attn_static)
  endif()
  add_test(NAME fuzz/${name} COMMAND replay_${name} ${FUZZ_DIR}/corpus/${name}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(fuzz/${name} PROPERTIES PASS_REGULAR_EXPRESSION "replay: [1-9][0-9]* inputs, no crash")
endforeach()
target_sources(replay_fuzz_lua_api PRIVATE ${FUZZ_REPLAY_DRIVER_C})

# Reproducers that need the C API (spec/fuzz/regress.c).
add_executable(fuzz_regress ${FUZZ_DIR}/regress.c)
target_include_directories(fuzz_regress PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/spec/c)
target_link_libraries(fuzz_regress PRIVATE attn_static)
add_test(NAME fuzz/regress COMMAND fuzz_regress)

# SPDX-License-Identifier: MIT
# Included at the end of CMakeLists.txt: the host library (attn embedded in
# C programs), its example hosts and tests, the CMake package and
# pkg-config files, and the documentation target.

# ---------------------------------------------------------------------------
# libattn_lua (src/attn_lua.h, src/host/): Lua states with attn preloaded,
# tensor hand-over, protected calls, the sandbox.  It carries the binding and
# the embedded Lua package and links liblua5.4 -- unlike attn/core.so, which
# must not.  The attn interpreter is one of its hosts.
file(GLOB ATTN_HOST_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/host/*.c)
add_library(attn_host_objects OBJECT ${ATTN_HOST_SOURCES} ${ATTN_LUA_SOURCES} ${ATTN_DIST_SOURCES} ${ATTN_PLOT_SOURCES}
  ${ATTN_EMBED_C})
target_include_directories(attn_host_objects PRIVATE ${PROJECT_SOURCE_DIR}/src ${LUA_INCLUDE_DIRS}
  ${CAIRO_INCLUDE_DIRS})
# What the binding needs beyond the core (the plot room's cairo).
set(ATTN_BINDING_LIBS ${CAIRO_LINK_LIBRARIES} ${MPI_C_LIBRARIES})

set(ATTN_HOST_INCLUDES $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}> ${LUA_INCLUDE_DIRS})

add_library(attn_lua_static STATIC $<TARGET_OBJECTS:attn_host_objects>)
set_target_properties(attn_lua_static PROPERTIES OUTPUT_NAME attn_lua EXPORT_NAME attn_lua_static)
target_link_libraries(attn_lua_static PUBLIC attn_static ${LUA_LINK_LIBRARIES} ${ATTN_BINDING_LIBS})
target_include_directories(attn_lua_static PUBLIC ${ATTN_HOST_INCLUDES})

add_library(attn_lua_shared SHARED $<TARGET_OBJECTS:attn_host_objects>)
set_target_properties(attn_lua_shared PROPERTIES OUTPUT_NAME attn_lua EXPORT_NAME attn_lua
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR} INSTALL_RPATH "$ORIGIN")
target_link_libraries(attn_lua_shared PUBLIC attn_shared ${LUA_LINK_LIBRARIES} PRIVATE ${ATTN_BINDING_LIBS})
target_include_directories(attn_lua_shared PUBLIC ${ATTN_HOST_INCLUDES})

# Example hosts: src/examples/*.c, each a program in bin/.
file(GLOB ATTN_EXAMPLES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/examples/*.c)
foreach(src IN LISTS ATTN_EXAMPLES)
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE attn_lua_static)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
endforeach()

# ---------------------------------------------------------------------------
# Install: the header, both libraries, the CMake package (find_package(attn):
# targets attn::attn_shared, attn::attn_static, attn::attn_lua,
# attn::attn_lua_static, attn::attn) and attn-lua.pc beside attn.pc.
install(FILES src/attn_lua.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS attn_lua_static attn_lua_shared
  EXPORT attnTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(ATTN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/attn)
install(EXPORT attnTargets NAMESPACE attn:: DESTINATION ${ATTN_CMAKE_DIR})
include(CMakePackageConfigHelpers)
configure_package_config_file(${PROJECT_SOURCE_DIR}/scripts/cmake/attnConfig.cmake.in
  ${CMAKE_BINARY_DIR}/attnConfig.cmake INSTALL_DESTINATION ${ATTN_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR ATTN_LUA_CMOD_DIR ATTN_LUA_LMOD_DIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/attnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/attnConfig.cmake ${CMAKE_BINARY_DIR}/attnConfigVersion.cmake
  DESTINATION ${ATTN_CMAKE_DIR})
# attn-lua.pc is relocatable like attn.pc (ATTN_PC_TO_PREFIX).
# libattn_lua.a's MPI library, for `pkg-config --static` (full paths, as
# find_package(MPI) gives them).
set(ATTN_PC_MPI_LIBS "")
if(MPI_C_FOUND)
  string(JOIN " " ATTN_PC_MPI_LIBS ${MPI_C_LINK_FLAGS} ${MPI_C_LIBRARIES})
endif()
configure_file(${PROJECT_SOURCE_DIR}/scripts/cmake/attn-lua.pc.in ${CMAKE_BINARY_DIR}/attn-lua.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/attn-lua.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# ---------------------------------------------------------------------------
# Tests of the host library: spec/c/test_host*.c and test_threads.c (states
# in several threads) link it (tests.cmake made them with the core only),
# and the example host runs on its own scripts.
if(ATTN_BUILD_TESTS)
  foreach(src IN LISTS ATTN_C_TESTS)
    get_filename_component(name ${src} NAME_WE)
    if(name MATCHES "^test_(host|threads)")
      target_link_libraries(${name} PRIVATE attn_lua_static)
    endif()
  endforeach()
  if(TARGET attn_viz)
    add_test(NAME example/attn_viz COMMAND attn_viz ${PROJECT_SOURCE_DIR}/src/examples/viz_dot.lua
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(example/attn_viz PROPERTIES
      PASS_REGULAR_EXPRESSION "rows sum to 1[^\n]*\nmost attended: ")
    add_test(NAME example/attn_viz-sandboxed-error COMMAND attn_viz
      ${PROJECT_SOURCE_DIR}/spec/support/host_escape.lua WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(example/attn_viz-sandboxed-error PROPERTIES WILL_FAIL ON)
  endif()
endif()

# ---------------------------------------------------------------------------
# The API reference (scripts/gen_reference.lua): Markdown and HTML pages by
# what users import, built with everything else into build/docs/reference
# and installed to share/doc/attn/reference.  docs/reference holds the
# committed Markdown; the docs/reference test fails when it is stale, when a
# public function has no entry or example, or when an example fails.
file(GLOB_RECURSE ATTN_REFERENCE_INPUTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/lua/attn/*.lua
  ${PROJECT_SOURCE_DIR}/docs/api/*.luadoc)
list(APPEND ATTN_REFERENCE_INPUTS ${PROJECT_SOURCE_DIR}/src/attn.h ${PROJECT_SOURCE_DIR}/src/attn_lua.h
  ${PROJECT_SOURCE_DIR}/scripts/gen_reference.lua ${PROJECT_SOURCE_DIR}/scripts/check_docs.lua
  ${PROJECT_SOURCE_DIR}/docs/reference/torch_names.txt)
set(ATTN_REFERENCE_DIR ${CMAKE_BINARY_DIR}/docs/reference)
add_custom_command(OUTPUT ${ATTN_REFERENCE_DIR}/html/index.html
  COMMAND ${CMAKE_COMMAND} -E env ATTN_SOURCE_DIR=${PROJECT_SOURCE_DIR}
    $<TARGET_FILE:attn> scripts/gen_reference.lua --md ${ATTN_REFERENCE_DIR} --html ${ATTN_REFERENCE_DIR}/html
  DEPENDS attn ${ATTN_REFERENCE_INPUTS}
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
  COMMENT "API reference: ${ATTN_REFERENCE_DIR} (Markdown) and ${ATTN_REFERENCE_DIR}/html"
  VERBATIM)
add_custom_target(reference ALL DEPENDS ${ATTN_REFERENCE_DIR}/html/index.html)
install(DIRECTORY ${ATTN_REFERENCE_DIR}/html/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/reference)
# the guides the reference links to (../guide-from-pytorch.md, ...)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md" PATTERN "*.png"
  PATTERN "reference" EXCLUDE PATTERN "notes" EXCLUDE PATTERN "examples" EXCLUDE PATTERN "api" EXCLUDE)
install(DIRECTORY ${ATTN_REFERENCE_DIR}/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/reference/md
  FILES_MATCHING PATTERN "*.md" PATTERN "html" EXCLUDE)
if(ATTN_BUILD_TESTS)
  add_test(NAME docs/reference COMMAND attn scripts/gen_reference.lua --check WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(docs/reference PROPERTIES ENVIRONMENT "ATTN_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endif()

# ---------------------------------------------------------------------------
# Documentation: `cmake --build build --target docs` writes the Lua API
# reference to build/docs/lua with LDoc (Debian: apt-get install lua-ldoc;
# scripts/setup.sh --docs).  The C API is documented in the headers
# (src/attn.h, src/attn_lua.h); docs/guide-from-pytorch.md is the guide.
find_program(LDOC_EXECUTABLE NAMES ldoc ldoc.lua)
if(LDOC_EXECUTABLE)
  # then scripts/check_docs.lua: fails when a public function has no entry
  add_custom_target(docs
    COMMAND ${LDOC_EXECUTABLE} -c config.ld -d ${CMAKE_BINARY_DIR}/docs/lua .
    COMMAND $<TARGET_FILE:attn> scripts/check_docs.lua --no-ldoc
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    COMMENT "LDoc: the Lua API reference in ${CMAKE_BINARY_DIR}/docs/lua"
    VERBATIM)
  add_dependencies(docs attn)
else()
  add_custom_target(docs
    COMMAND ${CMAKE_COMMAND} -E echo "docs: LDoc not found; install Debian's lua-ldoc (scripts/setup.sh --docs) and re-run cmake"
    COMMAND ${CMAKE_COMMAND} -E false
    VERBATIM)
endif()

# SPDX-License-Identifier: MIT
# C unit tests: spec/c/test_*.c, each its own executable and ctest test.
file(GLOB ATTN_C_TESTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/spec/c/test_*.c)
foreach(src IN LISTS ATTN_C_TESTS)
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/src/core
    ${PROJECT_SOURCE_DIR}/spec/c)
  target_link_libraries(${name} PRIVATE attn_static)
  add_test(NAME c/${name} COMMAND ${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endforeach()

# busted specs: spec/*_spec.lua, each run by stock lua5.4 against the
# freshly built attn/core.so and lua/attn, so the module path is what a user
# of `require "attn"` gets.
find_program(BUSTED_EXECUTABLE busted)
set(ATTN_SPEC_ENV
  "LUA_PATH_5_4=${PROJECT_SOURCE_DIR}/lua/?.lua\;${PROJECT_SOURCE_DIR}/lua/?/init.lua\;${PROJECT_SOURCE_DIR}/spec/?.lua\;\;"
  "LUA_CPATH_5_4=${CMAKE_BINARY_DIR}/?.so\;\;"
  "ATTN_BIN=$<TARGET_FILE:attn>"
  "ATTN_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
  "ATTN_BUILD_DIR=${CMAKE_BINARY_DIR}")
file(GLOB ATTN_SPECS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/spec/*_spec.lua)
if(BUSTED_EXECUTABLE AND LUA_EXECUTABLE)
  foreach(spec IN LISTS ATTN_SPECS)
    get_filename_component(name ${spec} NAME_WE)
    add_test(NAME lua/${name}
      COMMAND ${LUA_EXECUTABLE} ${BUSTED_EXECUTABLE} --output=TAP ${spec}
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(lua/${name} PROPERTIES ENVIRONMENT "${ATTN_SPEC_ENV}")
  endforeach()
  # The same specs again, run by the attn interpreter itself with its
  # embedded package (no LUA_PATH for attn), proving the CLI is a full Lua.
  add_test(NAME cli/busted-under-attn
    COMMAND $<TARGET_FILE:attn> ${BUSTED_EXECUTABLE} --output=TAP ${ATTN_SPECS}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli/busted-under-attn PROPERTIES ENVIRONMENT
    "LUA_PATH_5_4=${PROJECT_SOURCE_DIR}/spec/?.lua\;\;;ATTN_BIN=$<TARGET_FILE:attn>;ATTN_SOURCE_DIR=${PROJECT_SOURCE_DIR};ATTN_BUILD_DIR=${CMAKE_BINARY_DIR}")
else()
  message(WARNING "busted or lua5.4 not found: the Lua specs are not registered")
endif()

# attn.dist under MPI: spec/mpi/*_spec.lua run by mpirun with 2 and 4 ranks
# (--oversubscribe: CI machines may have fewer cores; --allow-run-as-root:
# CI runs as root; both are Open MPI flags, left out for MPICH's mpiexec),
# one BLAS thread per rank, one such test at a time (RUN_SERIAL).  Not in
# sanitizer builds: Open MPI's own allocations are reported by LSan, and its
# shared-memory transport confuses ASan/TSan (scripts/sanitize.sh, tsan.sh).
# spec/dist_spec.lua (1-rank world, fail-fast and timeout jobs) gets the
# launcher through ATTN_MPIEXEC and says when it skips.
set(ATTN_MPIEXEC_FLAGS "")
if(ATTN_MPIEXEC)
  execute_process(COMMAND ${ATTN_MPIEXEC} --version OUTPUT_VARIABLE _mpiexec_version ERROR_QUIET)
  if(_mpiexec_version MATCHES "Open MPI|OpenRTE")
    set(ATTN_MPIEXEC_FLAGS --oversubscribe --allow-run-as-root)
  endif()
endif()
string(REPLACE ";" " " ATTN_MPIEXEC_FLAGS_STR "${ATTN_MPIEXEC_FLAGS}")
# Open MPI's shared-memory transport copies large messages with
# process_vm_readv, which containers without CAP_SYS_PTRACE (typical CI)
# refuse; the specs use its copy-in/copy-out path instead (the benchmarks
# do not set this).
set(ATTN_MPI_TEST_ENV "OPENBLAS_NUM_THREADS=1" "OMPI_MCA_btl_vader_single_copy_mechanism=none")
file(GLOB ATTN_MPI_SPECS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/spec/mpi/*_spec.lua)
if(MPI_C_FOUND AND ATTN_MPIEXEC AND BUSTED_EXECUTABLE AND LUA_EXECUTABLE AND NOT ATTN_SANITIZE)
  if(TEST lua/dist_spec)
    set_property(TEST lua/dist_spec APPEND PROPERTY ENVIRONMENT "ATTN_MPIEXEC=${ATTN_MPIEXEC}"
      "ATTN_MPIEXEC_FLAGS=${ATTN_MPIEXEC_FLAGS_STR}" "ATTN_LUA=${LUA_EXECUTABLE}" ${ATTN_MPI_TEST_ENV})
    set_property(TEST lua/dist_spec PROPERTY RUN_SERIAL TRUE)
  endif()
  foreach(spec IN LISTS ATTN_MPI_SPECS)
    get_filename_component(name ${spec} NAME_WE)
    foreach(np 2 4)
      add_test(NAME mpi/${name}-np${np}
        COMMAND ${ATTN_MPIEXEC} ${ATTN_MPIEXEC_FLAGS} -np ${np}
                ${LUA_EXECUTABLE} ${BUSTED_EXECUTABLE} --output=TAP ${spec}
        WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
      set_tests_properties(mpi/${name}-np${np} PROPERTIES ENVIRONMENT
        "${ATTN_SPEC_ENV};${ATTN_MPI_TEST_ENV};ATTN_MPI_NP=${np}" RUN_SERIAL TRUE TIMEOUT 900)
    endforeach()
  endforeach()
elseif(ATTN_SANITIZE)
  message(STATUS "attn.dist: the mpirun specs are not registered in sanitizer builds (Open MPI's allocations and shared memory are sanitizer noise)")
else()
  message(STATUS "attn.dist: MPI or mpirun not found: the mpirun specs (spec/mpi) are skipped")
endif()

# The kernel tests once more per kernel family (src/core/kernels/kernels.h), with
# ATTN_ISA forcing it: isa/<family>/<test>.  scripts/isa_test.sh skips
# (ctest "Skipped") a family this CPU lacks and the one the plain tests
# above already ran with.  ctest -L isa runs only these.
set(ATTN_ISA_C_TESTS test_sdpa test_reduce test_grad_ops)
set(ATTN_ISA_SPECS sdpa_spec mha_spec reduce_spec math_spec gradcheck_spec grads_spec attention_modules_spec
  nn_layers_spec losses_spec numeric_robustness_spec)
foreach(fam IN ITEMS avx512 avx2 portable)
  foreach(name IN LISTS ATTN_ISA_C_TESTS)
    add_test(NAME isa/${fam}/c/${name}
      COMMAND sh ${PROJECT_SOURCE_DIR}/scripts/isa_test.sh $<TARGET_FILE:attn> ${fam} $<TARGET_FILE:${name}>
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(isa/${fam}/c/${name} PROPERTIES SKIP_RETURN_CODE 77 LABELS isa)
  endforeach()
  if(BUSTED_EXECUTABLE AND LUA_EXECUTABLE)
    foreach(name IN LISTS ATTN_ISA_SPECS)
      add_test(NAME isa/${fam}/lua/${name}
        COMMAND sh ${PROJECT_SOURCE_DIR}/scripts/isa_test.sh $<TARGET_FILE:attn> ${fam}
                ${LUA_EXECUTABLE} ${BUSTED_EXECUTABLE} --output=TAP ${PROJECT_SOURCE_DIR}/spec/${name}.lua
        WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
      set_tests_properties(isa/${fam}/lua/${name} PROPERTIES ENVIRONMENT "${ATTN_SPEC_ENV}" SKIP_RETURN_CODE 77
        LABELS isa)
    endforeach()
  endif()
endforeach()

# The rockspec end to end: luarocks make into a scratch tree, then stock
# lua5.4 with that tree's paths (scripts/check_rock.sh; skipped without luarocks).
add_test(NAME pkg/luarocks_make COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check_rock.sh
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(pkg/luarocks_make PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1800 LABELS pkg)

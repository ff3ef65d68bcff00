# SPDX-License-Identifier: MIT
# The fuzz targets (spec/fuzz/<name>.c), shared by spec/fuzz/CMakeLists.txt
# (libFuzzer builds) and spec/fuzz/replay.cmake (corpus replay in ctest).
# Core-only targets:
set(FUZZ_CORE_TARGETS fuzz_safetensors fuzz_npy fuzz_npz fuzz_views fuzz_broadcast)
# Targets that also need the Lua binding and the host library:
set(FUZZ_LUA_TARGETS fuzz_lua_tensor fuzz_lua_api)

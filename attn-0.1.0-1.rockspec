-- LuaRocks: `luarocks make` in a checkout builds attn with CMake against the
-- system's Lua 5.4 and OpenBLAS (Debian: liblua5.4-dev libopenblas-dev
-- libcjson-dev zlib1g-dev libcairo2-dev pkg-config cmake, as in
-- scripts/setup.sh) and deploys attn/core.so, the attn Lua package and the
-- attn interpreter into the rocks tree.  The C libraries, headers and
-- CMake/pkg-config files go to the rock's own directory (native/); use
-- `cmake --install` for a system-wide C install.
-- The version is the VERSION file's (LuaRocks reads no files, so the name
-- version field and source tag repeat it: scripts/set_version.sh changes them,
-- spec/version_spec.lua checks they agree).
rockspec_format = "3.0"
package = "attn"
version = "0.1.0-1"
source = {
   url = "git+file://.",
   tag = "v0.1.0",
}
description = {
   summary = "Lua-scriptable attention toolkit: float32 tensors, autograd and attention kernels in C",
   detailed = [[
attn is a C11 core of float32 N-d tensors (strided views, broadcasting,
reductions, OpenBLAS matmul, PyTorch-exact random numbers, autograd, fused
scaled-dot-product attention) exposed as the Lua 5.4 module `attn`, with
nn modules, losses, optimisers and weight files that give PyTorch's numbers.
]],
   license = "MIT",
   labels = { "tensor", "attention", "deep-learning", "blas" },
}
supported_platforms = { "linux" }
dependencies = {
   "lua >= 5.4, < 5.5",
}
build = {
   -- scripts/rock_build.sh: reuses ./build when scripts/main.sh made one
   -- (seconds instead of a fresh build), else builds build.luarocks on
   -- every core; installs the Lua package, attn/core.so and the attn
   -- interpreter into the tree, the C side under the rock's native/.
   type = "command",
   build_command = "scripts/rock_build.sh build",
   install_command = "scripts/rock_build.sh install '$(PREFIX)' '$(LUADIR)' '$(LIBDIR)' '$(BINDIR)'",
}

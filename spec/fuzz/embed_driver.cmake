# SPDX-License-Identifier: MIT
# Writes OUT: a C file defining the text of SRC (the fuzz_lua_api driver)
# as `const char attn_fuzz_driver[]` and its length.
file(READ ${SRC} hex HEX)
string(LENGTH "${hex}" hexlen)
math(EXPR size "${hexlen} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUT}.tmp "/* generated from spec/fuzz/lua_api.lua by spec/fuzz/embed_driver.cmake */\n#include <stddef.h>\nconst char attn_fuzz_driver[] = {${bytes}0};\nconst size_t attn_fuzz_driver_size = ${size};\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)

/* SPDX-License-Identifier: MIT */
/* luaopen_attn_core: the module table of attn.core, put together from
 * every binding file's opener (openers.h).  The one file that knows them
 * all, so that no binding file needs to know another. */
#include <string.h>

#include "binding.h"
#include "openers.h"

/* core._error(msg [, level]): error() for the package's Lua modules, which
   take it as their local `error`: a string message gets the position of
   the user's line (attnL_where) whatever level was asked, since the level
   counted from inside attn.nn or attn.F would often name attn's own file;
   level 0 and non-string values are raised as they are, and so is a
   message that already starts with that position (caught by pcall inside
   attn and raised again). */
static int l_error(lua_State *L) {
  lua_Integer level = luaL_optinteger(L, 2, 1);
  lua_settop(L, 1);
  if (lua_type(L, 1) == LUA_TSTRING && level > 0) {
    attnL_where(L);
    size_t n, m;
    const char *where = lua_tolstring(L, 2, &n), *msg = lua_tolstring(L, 1, &m);
    if (m >= n && memcmp(msg, where, n) == 0) { /* a message caught and raised again: positioned once */
      lua_settop(L, 1);
      return lua_error(L);
    }
    lua_insert(L, 1);
    lua_concat(L, 2);
  }
  return lua_error(L);
}

int luaopen_attn_core(lua_State *L) {
  static const attnL_opener openers[] = {ATTN_OPENERS};
  lua_newtable(L); /* module */
  int module = lua_gettop(L);
  lua_newtable(L); /* methods */
  int methods = lua_gettop(L);
  attnL_init_core(L);
  for (size_t i = 0; i < sizeof openers / sizeof openers[0]; i++) openers[i](L, module, methods);
  attnL_pushfn(L, l_error);
  lua_setfield(L, module, "_error");
  lua_pushcfunction(L, attnL_unwrap_method);
  lua_setfield(L, module, "_unwrap_method");
  lua_pushcfunction(L, attnL_declare);
  lua_setfield(L, module, "_declare");
  /* attn.version: the VERSION file's number (attn_version.h via attn.h). */
  lua_pushliteral(L, ATTN_VERSION);
  lua_setfield(L, module, "version");
  /* The Lua side adds methods of its own through attn.core._methods. */
  lua_pushvalue(L, methods);
  lua_setfield(L, module, "_methods");
  lua_pop(L, 1); /* methods */
  return 1;
}

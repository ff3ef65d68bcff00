#include <lua.h>
#include <lauxlib.h>
#include "attn.h"
int luaopen_attn_core(lua_State *L) {
  lua_newtable(L);
  return 1;
}

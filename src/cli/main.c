/* Placeholder until the full interpreter lands: runs a script with attn preloaded. */
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
int main(int argc, char **argv) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  int st = argc > 1 ? luaL_dofile(L, argv[1]) : 0;
  if (st) fprintf(stderr, "%s\n", lua_tostring(L, -1));
  lua_close(L);
  return st;
}

/* luaopen_attn_core: the module table of attn.core, put together from
 * every binding file's opener (openers.h).  The one file that knows them
 * all, so that no binding file needs to know another. */
#include "binding.h"
#include "openers.h"

int luaopen_attn_core(lua_State *L) {
  static const attnL_opener openers[] = {ATTN_OPENERS};
  lua_newtable(L); /* module */
  int module = lua_gettop(L);
  lua_newtable(L); /* methods */
  int methods = lua_gettop(L);
  attnL_init_core(L);
  for (size_t i = 0; i < sizeof openers / sizeof openers[0]; i++) openers[i](L, module, methods);
  /* The Lua side adds methods of its own through attn.core._methods. */
  lua_pushvalue(L, methods);
  lua_setfield(L, module, "_methods");
  lua_pop(L, 1); /* methods */
  return 1;
}

/* SPDX-License-Identifier: MIT */
/* attn: a Lua 5.4 interpreter with the attn package preloaded.
 *
 * The command line is the one of the stock `lua5.4` (see lua(1)):
 *   attn [options] [script [args]]
 *     -e stat   execute string 'stat'
 *     -i        enter interactive mode after executing 'script'
 *     -l mod    require library 'mod' into global 'mod'
 *     -l g=mod  require library 'mod' into global 'g'
 *     -v        show version information
 *     -E        ignore environment variables
 *     -W        turn warnings on
 *     --        stop handling options
 *     -         stop handling options and execute stdin
 *
 * The C module attn.core and the embedded modules of lua/attn/ go into
 * package.preload before anything runs (attn_lua_preload, from the host
 * library), so `require "attn"` is served by this binary alone and never
 * loads a second copy of the C module from disk.
 *
 * Two deliberate differences from lua.c: a failing script read from a pipe
 * (no script, stdin not a terminal) exits with status 1 like any other
 * failing script, and end of input inside an incomplete REPL statement
 * reports the syntax error instead of a garbled message. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#if defined(__GLIBC__) || defined(__linux__)
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "attn.h"
#include "attn_lua.h"

#ifdef ATTN_HAVE_READLINE
#include <readline/history.h>
#include <readline/readline.h>
#endif

static const char *progname = "attn";

/* ------------------------------------------------------------------------ */
/* Messages                                                                  */

static void message(const char *pname, const char *msg) {
  if (pname) fprintf(stderr, "%s: ", pname);
  fprintf(stderr, "%s\n", msg);
  fflush(stderr);
}

/* Prints the error object on top of the stack (if status is an error) and
   pops it. */
static int report(lua_State *L, int status) {
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    message(progname, msg ? msg : "(error object is not a string)");
    lua_pop(L, 1);
  }
  return status;
}

static void print_usage(const char *badoption) {
  fprintf(stderr, "%s: ", progname);
  if (badoption[1] == 'e' || badoption[1] == 'l')
    fprintf(stderr, "'%s' needs argument\n", badoption);
  else
    fprintf(stderr, "unrecognized option '%s'\n", badoption);
  fprintf(stderr,
          "usage: %s [options] [script [args]]\n"
          "Available options are:\n"
          "  -e stat   execute string 'stat'\n"
          "  -i        enter interactive mode after executing 'script'\n"
          "  -l mod    require library 'mod' into global 'mod'\n"
          "  -l g=mod  require library 'mod' into global 'g'\n"
          "  -v        show version information\n"
          "  -E        ignore environment variables\n"
          "  -W        turn warnings on\n"
          "  --        stop handling options\n"
          "  -         stop handling options and execute stdin\n",
          progname);
  fflush(stderr);
}

/* Only called for -v, -i and the interactive prompt: asking OpenBLAS for its
   core loads the library, which plain scripts should not pay for up front. */
static void print_version(void) {
  attn_blas_info info;
  const char *core = attn_blas_get_info(&info) == ATTN_OK ? info.core : "not available";
  printf("%s\n", LUA_COPYRIGHT);
  printf("attn %s (%s, OpenBLAS %s)\n", ATTN_VERSION, LUA_RELEASE, core);
  fflush(stdout);
}

/* ------------------------------------------------------------------------ */
/* Ctrl-C: the handler only installs a hook (lua_sethook is safe to call from
   a signal handler); the hook raises the error at the next Lua event. */

static lua_State *volatile running_L;

static void set_sigint(void (*handler)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
}

static void interrupt_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

static void on_sigint(int sig) {
  (void)sig;
  set_sigint(SIG_DFL); /* a second Ctrl-C kills the process */
  lua_sethook(running_L, interrupt_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT, 1);
}

/* ------------------------------------------------------------------------ */
/* Running chunks                                                            */

/* Error handler: the message (or the error object's __tostring) plus a
   traceback. */
static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* Calls the function below its narg arguments with the traceback handler and
   Ctrl-C interruption in place. */
static int docall(lua_State *L, int narg, int nres) {
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  running_L = L;
  set_sigint(on_sigint);
  int status = lua_pcall(L, narg, nres, base);
  set_sigint(SIG_DFL);
  lua_remove(L, base);
  return status;
}

static int dochunk(lua_State *L, int status) {
  if (status == LUA_OK) status = docall(L, 0, 0);
  return report(L, status);
}

/* A syntax error that a torch habit explains gets a line saying what to
   write instead: x:repeat(...) ('repeat' is a Lua keyword). */
static int load_hint(lua_State *L, int status) {
  if (status == LUA_ERRSYNTAX && lua_type(L, -1) == LUA_TSTRING && strstr(lua_tostring(L, -1), "near 'repeat'")) {
    lua_pushliteral(L, " ('repeat' is a Lua keyword: write x:rep(...) or x:tile(...) for torch's x.repeat(...))");
    lua_concat(L, 2);
  }
  return status;
}

static int dofile(lua_State *L, const char *name) { return dochunk(L, load_hint(L, luaL_loadfile(L, name))); }

static int dostring(lua_State *L, const char *s, const char *chunkname) {
  return dochunk(L, luaL_loadbuffer(L, s, strlen(s), chunkname));
}

/* -l spec: "mod" sets global mod (up to a '-' version suffix, as in Lua
   5.4.6), "g=mod" sets global g. */
static int dolibrary(lua_State *L, const char *spec) {
  const char *eq = strchr(spec, '=');
  const char *mod;
  size_t globlen;
  if (eq) {
    globlen = (size_t)(eq - spec);
    mod = eq + 1;
  } else {
    const char *dash = strchr(spec, '-');
    globlen = dash ? (size_t)(dash - spec) : strlen(spec);
    mod = spec;
  }
  lua_getglobal(L, "require");
  lua_pushstring(L, mod);
  int status = docall(L, 1, 1);
  if (status == LUA_OK) {
    lua_pushglobaltable(L);
    lua_pushlstring(L, spec, globlen);
    lua_pushvalue(L, -3);
    lua_settable(L, -3);
    lua_pop(L, 2); /* globals, module */
  }
  return report(L, status);
}

/* Pushes arg[1..#arg] for the script's `...`. */
static int pushargs(lua_State *L) {
  if (lua_getglobal(L, "arg") != LUA_TTABLE) luaL_error(L, "'arg' is not a table");
  int n = (int)luaL_len(L, -1);
  luaL_checkstack(L, n + 3, "too many arguments to script");
  int i;
  for (i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
  lua_remove(L, -i); /* the arg table */
  return n;
}

/* argv[0] is the script; argv[-1] tells whether "-" came after "--". */
static int handle_script(lua_State *L, char **argv) {
  const char *fname = argv[0];
  if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0) fname = NULL; /* stdin */
  int status = load_hint(L, luaL_loadfile(L, fname));
  if (status == LUA_OK) {
    int n = pushargs(L);
    status = docall(L, n, LUA_MULTRET);
  }
  return report(L, status);
}

static int handle_luainit(lua_State *L) {
  const char *name = "=LUA_INIT_5_4";
  const char *init = getenv(name + 1);
  if (init == NULL) {
    name = "=LUA_INIT";
    init = getenv(name + 1);
  }
  if (init == NULL) return LUA_OK;
  if (init[0] == '@') return dofile(L, init + 1);
  return dostring(L, init, name);
}

/* ------------------------------------------------------------------------ */
/* Command line                                                              */

enum { HAS_ERROR = 1, HAS_I = 2, HAS_V = 4, HAS_E = 8, HAS_NOENV = 16 };

/* Scans the options; *first is set to the script's index (argc when there is
   none), or to the offending option on error. */
static int collectargs(char **argv, int *first) {
  int args = 0;
  int i;
  for (i = 1; argv[i] != NULL; i++) {
    *first = i;
    if (argv[i][0] != '-') return args; /* the script */
    switch (argv[i][1]) {
    case '-': /* "--" */
      if (argv[i][2] != '\0') return HAS_ERROR;
      *first = i + 1;
      return args;
    case '\0': /* "-": stdin is the script */ return args;
    case 'E':
      if (argv[i][2] != '\0') return HAS_ERROR;
      args |= HAS_NOENV;
      break;
    case 'W':
      if (argv[i][2] != '\0') return HAS_ERROR;
      break;
    case 'i':
      args |= HAS_I; /* -i implies -v */
      /* fall through */
    case 'v':
      if (argv[i][2] != '\0') return HAS_ERROR;
      args |= HAS_V;
      break;
    case 'e':
      args |= HAS_E;
      /* fall through */
    case 'l': /* the argument may be glued ("-eprint(1)") or the next word */
      if (argv[i][2] == '\0') {
        i++;
        if (argv[i] == NULL || argv[i][0] == '-') {
          *first = i - 1;
          return HAS_ERROR;
        }
      }
      break;
    default: return HAS_ERROR;
    }
  }
  *first = i;
  return args;
}

/* Runs -e, -l and -W in order, up to the script at index n. */
static int runargs(lua_State *L, char **argv, int n) {
  for (int i = 1; i < n; i++) {
    int option = argv[i][1];
    if (option == 'e' || option == 'l') {
      const char *extra = argv[i] + 2;
      if (*extra == '\0') extra = argv[++i];
      int status = option == 'e' ? dostring(L, extra, "=(command line)") : dolibrary(L, extra);
      if (status != LUA_OK) return 0;
    } else if (option == 'W') {
      lua_warning(L, "@on", 0);
    }
  }
  return 1;
}

/* arg[0] is the script (or the interpreter when there is none); options
   and the interpreter get negative indices, script arguments positive. */
static void createargtable(lua_State *L, char **argv, int argc, int script) {
  if (script == argc) script = 0;
  lua_createtable(L, argc - (script + 1), script + 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

/* ------------------------------------------------------------------------ */
/* REPL                                                                      */

/* Pushes the prompt: _PROMPT / _PROMPT2 when set. */
static const char *push_prompt(lua_State *L, int firstline) {
  if (lua_getglobal(L, firstline ? "_PROMPT" : "_PROMPT2") == LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushstring(L, firstline ? "> " : ">> ");
    return lua_tostring(L, -1);
  }
  const char *p = luaL_tolstring(L, -1, NULL);
  lua_remove(L, -2);
  return p;
}

static void saveline(const char *line) {
#ifdef ATTN_HAVE_READLINE
  if (line[0] != '\0') add_history(line);
#else
  (void)line;
#endif
}

/* Reads one line (without its newline) and pushes it; 0 at end of input.
   On the first line of a statement "=expr" means "return expr". */
static int pushline(lua_State *L, int firstline) {
  const char *prompt = push_prompt(L, firstline);
#ifdef ATTN_HAVE_READLINE
  char *line = readline(prompt);
  lua_pop(L, 1); /* prompt */
  if (line == NULL) return 0;
  if (firstline && line[0] == '=')
    lua_pushfstring(L, "return %s", line + 1);
  else
    lua_pushstring(L, line);
  free(line);
#else
  fputs(prompt, stdout);
  fflush(stdout);
  lua_pop(L, 1); /* prompt */
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  int got = 0;
  for (;;) { /* lines of any length */
    char *p = luaL_prepbuffer(&b);
    if (fgets(p, LUAL_BUFFERSIZE, stdin) == NULL) break;
    size_t n = strlen(p);
    got = 1;
    if (n > 0 && p[n - 1] == '\n') {
      luaL_addsize(&b, n - 1);
      break;
    }
    luaL_addsize(&b, n);
  }
  luaL_pushresult(&b);
  if (!got) {
    lua_pop(L, 1);
    return 0;
  }
  if (firstline && lua_tostring(L, -1)[0] == '=') {
    lua_pushfstring(L, "return %s", lua_tostring(L, -1) + 1);
    lua_remove(L, -2);
  }
#endif
  return 1;
}

/* Is the error on top a syntax error that only more input could fix? */
static int incomplete(lua_State *L, int status) {
  static const char mark[] = "<eof>";
  const size_t marklen = sizeof mark - 1;
  if (status != LUA_ERRSYNTAX) return 0;
  size_t len;
  const char *msg = lua_tolstring(L, -1, &len);
  return msg && len >= marklen && strcmp(msg + len - marklen, mark) == 0;
}

/* The line at index 1 as an expression: "return <line>;". */
static int addreturn(lua_State *L) {
  const char *line = lua_tostring(L, -1);
  const char *retline = lua_pushfstring(L, "return %s;", line);
  int status = luaL_loadbuffer(L, retline, strlen(retline), "=stdin");
  if (status == LUA_OK) {
    lua_remove(L, -2); /* retline */
    saveline(line);
  } else {
    lua_pop(L, 2); /* error, retline */
  }
  return status;
}

/* The line at index 1 as a statement, reading continuation lines while it is
   incomplete. */
static int multiline(lua_State *L) {
  for (;;) {
    size_t len;
    const char *line = lua_tolstring(L, 1, &len);
    int status = luaL_loadbuffer(L, line, len, "=stdin");
    if (!incomplete(L, status)) {
      saveline(line);
      return status;
    }
    if (!pushline(L, 0)) { /* end of input: report the syntax error */
      saveline(line);
      return status;
    }
    lua_remove(L, -2); /* the syntax error */
    lua_pushliteral(L, "\n");
    lua_insert(L, -2);
    lua_concat(L, 3); /* line .. "\n" .. next line */
  }
}

/* Reads a statement and compiles it; -1 at end of input.  Leaves the compiled
   chunk (or the error) as the only value on the stack. */
static int loadline(lua_State *L) {
  lua_settop(L, 0);
  if (!pushline(L, 1)) return -1;
  int status = addreturn(L);
  if (status != LUA_OK) status = multiline(L);
  lua_remove(L, 1); /* the line */
  return status;
}

/* Prints whatever the statement returned, with the global print. */
static void print_results(lua_State *L) {
  int n = lua_gettop(L);
  if (n == 0) return;
  luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
  lua_getglobal(L, "print");
  lua_insert(L, 1);
  if (lua_pcall(L, n, 0, 0) != LUA_OK)
    message(progname, lua_pushfstring(L, "error calling 'print' (%s)", lua_tostring(L, -1)));
}

static void repl(lua_State *L) {
  const char *saved = progname;
  progname = NULL; /* errors at the prompt carry no program name */
#ifdef ATTN_HAVE_READLINE
  rl_readline_name = "attn";
#endif
  int status;
  while ((status = loadline(L)) != -1) {
    if (status == LUA_OK) status = docall(L, 0, LUA_MULTRET);
    if (status == LUA_OK)
      print_results(L);
    else
      report(L, status);
  }
  lua_settop(L, 0);
  fputs("\n", stdout);
  fflush(stdout);
  progname = saved;
}

/* ------------------------------------------------------------------------ */

static int pmain(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = lua_touserdata(L, 2);
  int script;
  int args = collectargs(argv, &script);
  luaL_checkversion(L);
  if (args == HAS_ERROR) {
    print_usage(argv[script]);
    return 0;
  }
  if (args & HAS_NOENV) { /* package reads LUA_PATH etc. unless this is set */
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  }
  luaL_openlibs(L);
  if (attn_lua_preload(L) != ATTN_OK) return luaL_error(L, "%s", attn_last_error());
  createargtable(L, argv, argc, script);
  lua_gc(L, LUA_GCRESTART);
  lua_gc(L, LUA_GCGEN, 0, 0);
  if (args & HAS_V) print_version();
  if (!(args & HAS_NOENV) && handle_luainit(L) != LUA_OK) return 0;
  if (!runargs(L, argv, script)) return 0;
  if (script < argc && handle_script(L, argv + script) != LUA_OK) return 0;
  if (args & HAS_I) {
    repl(L);
  } else if (script == argc && !(args & (HAS_E | HAS_V))) {
    if (isatty(STDIN_FILENO)) {
      print_version();
      repl(L);
    } else if (dofile(L, NULL) != LUA_OK) {
      return 0;
    }
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* glibc's malloc serves tensors of 128 KB and more with mmap, and its
   thresholds only adapt after such a block is freed; Lua's collector frees
   tensors in batches, so the top of the heap empties and is trimmed, and
   the next tensors fault their pages in again (a LayerNorm over [720, 512]
   under no_grad spent 30% of its time in page faults: 1.1 ms a call, 0.2
   ms without).  The attn program owns its process, so it fixes both
   thresholds: blocks below 32 MB come from the heap and are reused, and up
   to 64 MB of free heap top is kept.  Peak RSS is what the program's
   tensors need at once; the resident set can stay up to 64 MB above what
   is live.  A user's own MALLOC_* or GLIBC_TUNABLES settings win; a
   program embedding libattn_lua keeps its own allocator policy. */
static void tune_malloc(void) {
#if defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
  if (getenv("GLIBC_TUNABLES") || getenv("MALLOC_MMAP_THRESHOLD_") || getenv("MALLOC_TRIM_THRESHOLD_")) return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

int main(int argc, char **argv) {
  tune_malloc();
  static char default_name[] = "attn";
  static char *default_argv[] = {default_name, NULL};
  if (argc < 1 || argv[0] == NULL) {
    argc = 1;
    argv = default_argv;
  }
  if (argv[0][0] != '\0') progname = argv[0];
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    message(progname, "cannot create state: not enough memory");
    return EXIT_FAILURE;
  }
  lua_gc(L, LUA_GCSTOP); /* no collections while the libraries load */
  lua_pushcfunction(L, pmain);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  int status = lua_pcall(L, 2, 1, 0);
  int ok = lua_toboolean(L, -1);
  report(L, status);
  lua_close(L);
  return status == LUA_OK && ok ? EXIT_SUCCESS : EXIT_FAILURE;
}

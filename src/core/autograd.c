/* Reverse-mode autograd: graph nodes, recording, the backward engine.
 *
 * A tensor that requires grad carries an attn_autograd record.  A recorded
 * op gives its result a node (grad_fn) holding edges to the nodes of its
 * inputs (a leaf's edge goes to its AccumulateGrad node) and detached
 * aliases of the tensors its backward needs.  Nodes are refcounted: the
 * result owns its grad_fn, a node owns the nodes it points to, and an
 * AccumulateGrad node owns its leaf, so dropping the last result frees the
 * whole graph.  Saved aliases share storage but not the autograd record,
 * so nothing points back at a result and no cycles form.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>

static _Thread_local bool grad_disabled;

bool attn_grad_enabled(void) { return !grad_disabled; }

bool attn_set_grad_enabled(bool enabled) {
  bool prev = !grad_disabled;
  grad_disabled = !enabled;
  return prev;
}

/* ------------------------------------------------------------------------ */
/* Records and nodes                                                         */

static struct attn_autograd *ag_get(attn_tensor *t) {
  if (!t->autograd) t->autograd = attn__calloc(1, sizeof *t->autograd);
  return t->autograd;
}

static void node_release(attn_node *n);

static void node_free_saved(attn_node *n) {
  for (int i = 0; i < ATTN_NODE_SAVED; i++) {
    if (n->saved[i]) __atomic_sub_fetch(&n->saved[i]->storage->saved_refs, 1, __ATOMIC_RELAXED);
    attn_tensor_release(n->saved[i]);
    n->saved[i] = NULL;
  }
  if (n->extra_free) n->extra_free(n->extra);
  else free(n->extra);
  n->extra = NULL;
}

/* Nodes form chains as long as a training sequence; release iteratively
   so that dropping a 100k-node graph cannot overflow the C stack. */
static void node_release(attn_node *n) {
  attn_node *stack_small[64];
  attn_node **stack = stack_small;
  size_t cap = 64, top = 0;
  if (!n) return;
  stack[top++] = n;
  while (top) {
    attn_node *cur = stack[--top];
    if (__atomic_sub_fetch(&cur->refcount, 1, __ATOMIC_ACQ_REL) != 0) continue;
    node_free_saved(cur);
    attn_tensor_release(cur->grad_acc);
    if (cur->leaf) {
      if (cur->leaf->autograd && cur->leaf->autograd->accumulator == cur) cur->leaf->autograd->accumulator = NULL;
      attn_tensor_release(cur->leaf);
    }
    for (int i = 0; i < cur->n_next; i++) {
      attn_node *nx = cur->next[i].node;
      if (!nx) continue;
      if (top == cap) {
        size_t ncap = cap * 2;
        attn_node **ns = malloc(ncap * sizeof *ns);
        if (!ns) { /* fall back to recursion for this one: rare */
          node_release(nx);
          continue;
        }
        memcpy(ns, stack, top * sizeof *ns);
        if (stack != stack_small) free(stack);
        stack = ns;
        cap = ncap;
      }
      stack[top++] = nx;
    }
    attn__unreserve(cur->budget, (int64_t)(sizeof *cur + (size_t)(cur->n_next ? cur->n_next : 1) * sizeof *cur->next));
    free(cur->next);
    free(cur);
    ATTN__COUNT(attn__live_nodes, -1);
  }
  if (stack != stack_small) free(stack);
}

static attn_node *node_retain(attn_node *n) {
  if (n) __atomic_add_fetch(&n->refcount, 1, __ATOMIC_RELAXED);
  return n;
}

/* Called by attn_tensor_release when a tensor's last reference goes. */
void attn__autograd_release(attn_tensor *t) {
  struct attn_autograd *ag = t->autograd;
  if (!ag) return;
  attn_tensor_release(ag->grad);
  if (ag->grad_fn) {
    if (ag->grad_fn->retained == t) ag->grad_fn->retained = NULL;
    node_release(ag->grad_fn);
  }
  free(ag);
  t->autograd = NULL;
}

static attn_node *node_alloc(const char *name, int n_next) {
  int64_t bytes = (int64_t)(sizeof(attn_node) + (size_t)(n_next ? n_next : 1) * sizeof(attn__edge));
  bool over;
  attn_budget *b = attn__reserve(bytes, &over); /* a graph of views grows without storage */
  if (over) return NULL;
  attn_node *n = attn__calloc(1, sizeof *n);
  if (!n) {
    attn__unreserve(b, bytes);
    return NULL;
  }
  n->budget = b;
  n->next = attn__calloc((size_t)(n_next ? n_next : 1), sizeof *n->next);
  if (!n->next) {
    free(n);
    attn__unreserve(b, bytes);
    return NULL;
  }
  n->refcount = 1;
  n->name = name;
  n->n_next = n_next;
  ATTN__COUNT(attn__live_nodes, 1);
  return n;
}

/* The node a gradient for t flows into: its grad_fn, or its leaf
   accumulator (created on demand and cached weakly on the leaf). */
static attn_node *edge_target(attn_tensor *t) {
  struct attn_autograd *ag = t->autograd;
  if (!ag || !ag->requires_grad) return NULL;
  if (ag->grad_fn) return node_retain(ag->grad_fn);
  if (ag->accumulator) return node_retain(ag->accumulator);
  attn_node *acc = node_alloc("AccumulateGrad", 0);
  if (!acc) return NULL;
  acc->leaf = attn_tensor_retain(t);
  ag->accumulator = acc;
  return acc;
}

bool attn_requires_grad(const attn_tensor *t) { return t->autograd && t->autograd->requires_grad; }

bool attn__ag_needed(int n, const attn_tensor *const *inputs) {
  if (grad_disabled) return false;
  for (int i = 0; i < n; i++)
    if (inputs[i] && attn_requires_grad(inputs[i])) return true;
  return false;
}

/* A detached alias of t: same storage and geometry, no autograd. */
static attn_tensor *alias(const attn_tensor *t) {
  return attn__tensor_new(t->storage, t->offset, t->ndim, t->shape, t->stride);
}

attn_status attn__ag_record(attn_tensor *out, const char *name, attn__backward_fn fn, int n,
                            const attn_tensor *const *inputs, int nsave, const attn_tensor *const *saved,
                            attn_node **node_out) {
  attn_node *node = node_alloc(name, n);
  if (!node) return attn__nomem(name, (int64_t)(sizeof(attn_node) + (size_t)n * sizeof(attn__edge)));
  node->backward = fn;
  for (int i = 0; i < n; i++) {
    attn__edge *e = &node->next[i];
    if (!inputs[i]) continue;
    e->ndim = inputs[i]->ndim;
    memcpy(e->shape, inputs[i]->shape, sizeof e->shape);
    if (attn_requires_grad(inputs[i])) {
      e->node = edge_target((attn_tensor *)inputs[i]);
      if (!e->node) goto oom;
    }
  }
  for (int i = 0; i < nsave; i++) {
    if (!saved[i]) continue;
    node->saved[i] = alias(saved[i]);
    if (!node->saved[i]) goto oom;
    __atomic_add_fetch(&saved[i]->storage->saved_refs, 1, __ATOMIC_RELAXED);
    node->saved_version[i] = saved[i]->storage->version;
  }
  struct attn_autograd *ag = ag_get(out);
  if (!ag) goto oom;
  if (ag->grad_fn) node_release(ag->grad_fn);
  ag->requires_grad = true;
  ag->grad_fn = node;
  if (node_out) *node_out = node;
  return ATTN_OK;
oom:
  node_release(node);
  return attn__nomem(name, (int64_t)sizeof(attn_tensor));
}

/* ------------------------------------------------------------------------ */
/* Public tensor-level API                                                   */

attn_status attn_requires_grad_(attn_tensor *t, bool on) {
  if (on && t->dtype != ATTN_FLOAT32)
    return attn_set_error(ATTN_ERR_ARG, "requires_grad_: only floating point tensors can require gradients (got %s)",
                          attn_dtype_name(t->dtype));
  if (t->autograd && t->autograd->grad_fn) {
    if (on) return ATTN_OK;
    return attn_set_error(ATTN_ERR_STATE,
                          "requires_grad_: only leaf tensors can stop requiring grad; use detach() for a non-leaf");
  }
  if (!on && !t->autograd) return ATTN_OK;
  struct attn_autograd *ag = ag_get(t);
  if (!ag) return attn_set_error(ATTN_ERR_NOMEM, "requires_grad_: out of memory");
  ag->requires_grad = on;
  return ATTN_OK;
}

bool attn_is_leaf(const attn_tensor *t) { return !t->autograd || !t->autograd->grad_fn; }

attn_tensor *attn_grad(const attn_tensor *t) { return t->autograd ? t->autograd->grad : NULL; }

attn_status attn_set_grad(attn_tensor *t, attn_tensor *g) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  if (g && !attn_same_shape(t, g))
    return attn_set_error(ATTN_ERR_SHAPE, "set_grad: gradient of shape %s for a tensor of shape %s",
                          ATTN_SHAPE(g, sa), ATTN_SHAPE(t, sb));
  if (!g && !t->autograd) return ATTN_OK;
  /* The gradient is kept as a detached alias of g (same storage, no
     autograd record): t.grad = t, or a g whose grad or graph leads back to
     t, would otherwise be a reference cycle that is never freed. */
  attn_tensor *keep = NULL;
  if (g) {
    attn_status st = attn_detach(g, &keep);
    if (st) return st;
  }
  struct attn_autograd *ag = ag_get(t);
  if (!ag) {
    attn_tensor_release(keep);
    return attn_set_error(ATTN_ERR_NOMEM, "set_grad: out of memory");
  }
  attn_tensor_release(ag->grad);
  ag->grad = keep;
  return ATTN_OK;
}

attn_status attn_set_grad_hook(attn_tensor *t, attn_grad_hook_fn fn, void *ctx) {
  if (fn && !attn_is_leaf(t))
    return attn_set_error(ATTN_ERR_STATE, "set_grad_hook: the tensor is not a leaf (hooks run when a leaf's grad "
                                          "is accumulated)");
  if (!fn && !t->autograd) return ATTN_OK;
  struct attn_autograd *ag = ag_get(t);
  if (!ag) return attn_set_error(ATTN_ERR_NOMEM, "set_grad_hook: out of memory");
  ag->hook = fn;
  ag->hook_ctx = fn ? ctx : NULL;
  return ATTN_OK;
}

void *attn_grad_hook_ctx(const attn_tensor *t) { return t->autograd && t->autograd->hook ? t->autograd->hook_ctx : NULL; }

/* A node whose backward is the caller's C function (see attn.h). */
typedef struct {
  attn_custom_backward_fn fn;
  void *ctx;
  void (*ctx_free)(void *);
} custom_extra;

static void custom_extra_free(void *p) {
  custom_extra *e = p;
  if (e && e->ctx_free) e->ctx_free(e->ctx);
  free(e);
}

static attn_status custom_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  custom_extra *e = node->extra;
  if (!e) return attn_set_error(ATTN_ERR_STATE, "backward: %s has no state (already freed)", node->name);
  attn_status st = e->fn(e->ctx, g, grads);
  if (st) return st;
  for (int i = 0; i < node->n_next; i++)
    if (!node->next[i].node) {
      attn_tensor_release(grads[i]);
      grads[i] = NULL;
    }
  return ATTN_OK;
}

attn_status attn_custom_record(attn_tensor *out, const char *name, int n, const attn_tensor *const *inputs,
                               attn_custom_backward_fn fn, void *ctx, void (*ctx_free)(void *)) {
  if (!attn__ag_needed(n, inputs)) {
    if (ctx_free) ctx_free(ctx);
    return ATTN_OK;
  }
  custom_extra *e = attn__calloc(1, sizeof *e);
  if (!e) {
    if (ctx_free) ctx_free(ctx);
    return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory recording the graph", name);
  }
  e->fn = fn, e->ctx = ctx, e->ctx_free = ctx_free;
  attn_node *node;
  attn_status st = attn__ag_record(out, name, custom_backward, n, inputs, 0, NULL, &node);
  if (st) {
    custom_extra_free(e);
    return st;
  }
  node->extra = e;
  node->extra_free = custom_extra_free;
  return ATTN_OK;
}

const char *attn_grad_fn_name(const attn_tensor *t) {
  return t->autograd && t->autograd->grad_fn ? t->autograd->grad_fn->name : NULL;
}

attn_status attn_retain_grad(attn_tensor *t) {
  if (!attn_requires_grad(t))
    return attn_set_error(ATTN_ERR_STATE, "retain_grad: the tensor does not require grad");
  if (attn_is_leaf(t)) return ATTN_OK; /* leaves keep their grad anyway */
  t->autograd->retains_grad = true;
  t->autograd->grad_fn->retained = t;
  return ATTN_OK;
}

attn_status attn_detach(const attn_tensor *t, attn_tensor **out) {
  attn_tensor *a = alias(t);
  if (!a) return attn_set_error(ATTN_ERR_NOMEM, "detach: out of memory");
  *out = a;
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* Gradient helpers                                                          */

attn_status attn__sum_to_shape(const attn_tensor *grad, int ndim, const int64_t *shape, attn_tensor **out) {
  if (grad->ndim == ndim) {
    bool same = true;
    for (int i = 0; i < ndim && same; i++) same = grad->shape[i] == shape[i];
    if (same) {
      *out = attn_tensor_retain((attn_tensor *)grad);
      return ATTN_OK;
    }
  }
  attn_tensor *cur = attn_tensor_retain((attn_tensor *)grad);
  attn_status st = ATTN_OK;
  /* leading dims added by broadcasting: folded into one (a view where the
     layout allows) and summed in one reduction, or just dropped when they
     hold one element (a batch of 1: no reduction at all) */
  if (cur->ndim > ndim) {
    const int lead = cur->ndim - ndim;
    int64_t fshape[ATTN_MAX_DIMS], n = 1;
    for (int i = 0; i < lead; i++) n *= cur->shape[i];
    fshape[0] = n;
    for (int i = 0; i < ndim; i++) fshape[1 + i] = cur->shape[lead + i];
    attn_tensor *folded, *next;
    if (n == 1) {
      st = attn_reshape(cur, ndim, fshape + 1, &next);
    } else if ((st = attn_reshape(cur, ndim + 1, fshape, &folded)) == ATTN_OK) {
      st = attn_reduce_dim(ATTN_SUM, folded, 0, false, NULL, &next);
      attn_tensor_release(folded);
    }
    if (st == ATTN_OK) {
      attn_tensor_release(cur);
      cur = next;
    }
  }
  for (int d = 0; d < ndim && st == ATTN_OK; d++) {
    if (shape[d] == 1 && cur->shape[d] != 1) {
      attn_tensor *next;
      if ((st = attn_reduce_dim(ATTN_SUM, cur, d, true, NULL, &next))) break;
      attn_tensor_release(cur);
      cur = next;
    }
  }
  if (st) {
    attn_tensor_release(cur);
    return st;
  }
  *out = cur;
  return ATTN_OK;
}

/* acc += g, out of place (g may alias saved data or the incoming grad). */
static attn_status accumulate(attn_tensor **acc, attn_tensor *g) {
  if (!*acc) {
    *acc = attn_tensor_retain(g);
    return ATTN_OK;
  }
  attn_tensor *sum;
  attn_status st = attn_binary(ATTN_ADD, *acc, g, &sum);
  if (st) return st;
  attn_tensor_release(*acc);
  *acc = sum;
  return ATTN_OK;
}

/* leaf.grad += g: the first gradient is stored as its own contiguous copy
   (never an alias of graph data); later ones are added in place. */
static attn_status accumulate_leaf(attn_tensor *leaf, attn_tensor *g) {
  struct attn_autograd *ag = ag_get(leaf);
  if (!ag) return attn_set_error(ATTN_ERR_NOMEM, "backward: out of memory");
  if (!ag->grad) return attn_clone(g, &ag->grad);
  if (attn__has_internal_overlap(ag->grad) || !attn_same_shape(ag->grad, g)) {
    attn_tensor *sum;
    attn_status st = attn_binary(ATTN_ADD, ag->grad, g, &sum);
    if (st) return st;
    attn_tensor_release(ag->grad);
    ag->grad = sum;
    return ATTN_OK;
  }
  return attn_binary_(ATTN_ADD, ag->grad, g);
}

/* ------------------------------------------------------------------------ */
/* The engine                                                                */

static unsigned long backward_epoch;

typedef struct {
  attn_node **items;
  size_t n, cap;
} node_vec;

static bool vec_push(node_vec *v, attn_node *n) {
  if (v->n == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 64;
    attn_node **items = realloc(v->items, cap * sizeof *items);
    if (!items) return false;
    v->items = items;
    v->cap = cap;
  }
  v->items[v->n++] = n;
  return true;
}

static attn_status run_node(attn_node *node, attn_tensor *g, bool retain_graph, node_vec *ready) {
  attn_status st = ATTN_OK;
  /* a non-leaf that retains grad accumulates over backward calls, like a
     leaf (torch's retain_grad hook) */
  if (node->retained && (st = accumulate_leaf(node->retained, g))) return st;
  if (node->leaf) {
    if ((st = accumulate_leaf(node->leaf, g))) return st;
    const struct attn_autograd *ag = node->leaf->autograd;
    return ag && ag->hook ? ag->hook(ag->hook_ctx, node->leaf) : ATTN_OK;
  }
  if (node->released)
    return attn_set_error(ATTN_ERR_STATE,
                          "backward: trying to go through the graph a second time (at %s); its saved tensors "
                          "were freed after the first backward. Pass retain_graph = true to the first call",
                          node->name);
  for (int i = 0; i < ATTN_NODE_SAVED; i++)
    if (node->saved[i] && node->saved[i]->storage->version != node->saved_version[i])
      return attn_set_error(ATTN_ERR_STATE,
                            "backward: a tensor saved by %s was modified in place after it was used; "
                            "clone it before modifying",
                            node->name);
  attn_tensor *grads[64] = {0};
  attn_tensor **gs = node->n_next <= 64 ? grads : attn__calloc((size_t)node->n_next, sizeof *gs);
  if (!gs) return attn_set_error(ATTN_ERR_NOMEM, "backward: out of memory");
  st = node->backward(node, g, gs);
  for (int i = 0; i < node->n_next && st == ATTN_OK; i++) {
    attn__edge *e = &node->next[i];
    if (!e->node) continue;
    if (!gs[i]) {
      st = attn_set_error(ATTN_ERR_STATE, "backward: %s gave no gradient for input %d", node->name, i);
      break;
    }
    bool shape_ok = gs[i]->ndim == e->ndim;
    for (int d = 0; shape_ok && d < e->ndim; d++) shape_ok = gs[i]->shape[d] == e->shape[d];
    if (!shape_ok) {
      char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
      st = attn_set_error(ATTN_ERR_SHAPE, "backward: %s gave a gradient of shape %s for an input of shape %s",
                          node->name, ATTN_SHAPE(gs[i], sa), attn_shape_str(e->ndim, e->shape, sb, sizeof sb));
      break;
    }
    if ((st = accumulate(&e->node->grad_acc, gs[i]))) break;
    if (--e->node->deps == 0 && !vec_push(ready, e->node))
      st = attn_set_error(ATTN_ERR_NOMEM, "backward: out of memory");
  }
  for (int i = 0; i < node->n_next; i++) attn_tensor_release(gs[i]);
  if (gs != grads) free(gs);
  if (st == ATTN_OK && !retain_graph) {
    /* Like torch, only a node whose saved state was freed refuses a second
       pass; nodes that saved nothing (views, add, neg) may run again. */
    bool had_state = node->extra != NULL;
    for (int i = 0; i < ATTN_NODE_SAVED; i++) had_state = had_state || node->saved[i];
    node_free_saved(node);
    if (had_state) node->released = true;
  }
  return st;
}

attn_status attn_backward(attn_tensor *t, const attn_tensor *grad, bool retain_graph) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  if (!attn_requires_grad(t))
    return attn_set_error(ATTN_ERR_STATE,
                          "backward: the tensor does not require grad and has no grad_fn (did an input set "
                          "requires_grad? was it computed under no_grad?)");
  attn_tensor *seed = NULL;
  attn_status st;
  if (grad) {
    if (!attn_same_shape(grad, t))
      return attn_set_error(ATTN_ERR_SHAPE, "backward: gradient of shape %s for a tensor of shape %s",
                            ATTN_SHAPE(grad, sa), ATTN_SHAPE(t, sb));
    seed = attn_tensor_retain((attn_tensor *)grad);
  } else {
    if (attn_tensor_numel(t) != 1)
      return attn_set_error(ATTN_ERR_SHAPE,
                            "backward: a gradient can be implied only for a tensor with one element, got %s; "
                            "pass the gradient",
                            ATTN_SHAPE(t, sa));
    if ((st = attn_full(t->ndim, t->shape, 1.0f, &seed))) return st;
  }
  bool prev = attn_set_grad_enabled(false);
  attn_node *root = edge_target(t);
  if (!root) {
    attn_tensor_release(seed);
    attn_set_grad_enabled(prev);
    return attn_set_error(ATTN_ERR_NOMEM, "backward: out of memory");
  }
  /* Count, for every reachable node, the edges that lead into it. */
  unsigned long epoch = __atomic_add_fetch(&backward_epoch, 1, __ATOMIC_RELAXED);
  node_vec all = {0}, ready = {0}, stack = {0};
  st = ATTN_OK;
  root->epoch = epoch;
  root->deps = 0;
  if (!vec_push(&stack, root) || !vec_push(&all, root)) st = attn_set_error(ATTN_ERR_NOMEM, "backward: out of memory");
  while (st == ATTN_OK && stack.n) {
    attn_node *n = stack.items[--stack.n];
    for (int i = 0; i < n->n_next; i++) {
      attn_node *nx = n->next[i].node;
      if (!nx) continue;
      if (nx->epoch != epoch) {
        nx->epoch = epoch;
        nx->deps = 0;
        attn_tensor_release(nx->grad_acc);
        nx->grad_acc = NULL;
        if (!vec_push(&stack, nx) || !vec_push(&all, nx)) {
          st = attn_set_error(ATTN_ERR_NOMEM, "backward: out of memory");
          break;
        }
      }
      nx->deps++;
    }
  }
  attn_tensor_release(root->grad_acc);
  root->grad_acc = seed;
  seed = NULL;
  if (st == ATTN_OK && !vec_push(&ready, root)) st = attn_set_error(ATTN_ERR_NOMEM, "backward: out of memory");
  while (st == ATTN_OK && ready.n) {
    attn_node *n = ready.items[--ready.n];
    attn_tensor *g = n->grad_acc;
    n->grad_acc = NULL;
    st = run_node(n, g, retain_graph, &ready);
    attn_tensor_release(g);
  }
  /* drop partial sums left by an error */
  for (size_t i = 0; i < all.n; i++) {
    attn_tensor_release(all.items[i]->grad_acc);
    all.items[i]->grad_acc = NULL;
  }
  free(all.items);
  free(ready.items);
  free(stack.items);
  node_release(root);
  attn_set_grad_enabled(prev);
  return st;
}

/* ------------------------------------------------------------------------ */
/* In-place ops under autograd                                               */

bool attn__ag_inplace_needed(const attn_tensor *target, int n, const attn_tensor *const *others) {
  if (grad_disabled) return false;
  if (attn_requires_grad(target)) return true;
  return attn__ag_needed(n, others);
}

attn_status attn__ag_inplace_check(const char *fn, const attn_tensor *target) {
  if (attn_requires_grad(target) && attn_is_leaf(target))
    return attn_set_error(ATTN_ERR_STATE,
                          "%s: a leaf tensor that requires grad is used in an in-place operation; run it under "
                          "no_grad or work on a clone",
                          fn);
  const struct attn_autograd *ag = target->autograd;
  /* Other tensors on the same storage that are not autograd's saved
     copies are views: writing through target would change them behind
     autograd's back.  Saved copies are guarded by the version counter. */
  long views = __atomic_load_n(&target->storage->refcount, __ATOMIC_RELAXED) -
               __atomic_load_n(&target->storage->saved_refs, __ATOMIC_RELAXED);
  if ((ag && ag->grad_fn && ag->grad_fn->is_view) || views > 1)
    return attn_set_error(ATTN_ERR_STATE,
                          "%s: in-place operation on a view (or a tensor sharing its storage) that takes part "
                          "in autograd is not supported; use the out-of-place form or attn.cat/attn.stack",
                          fn);
  return ATTN_OK;
}

attn_status attn__ag_inplace_commit(attn_tensor *target, attn_tensor *result) {
  /* Nodes that saved the target's old values get a private copy first. */
  attn_node *node = result->autograd ? result->autograd->grad_fn : NULL;
  attn_status st = ATTN_OK;
  for (int i = 0; node && i < ATTN_NODE_SAVED && st == ATTN_OK; i++) {
    attn_tensor *s = node->saved[i];
    if (s && s->storage == target->storage) {
      attn_tensor *copy;
      if ((st = attn_clone(s, &copy))) break;
      __atomic_sub_fetch(&s->storage->saved_refs, 1, __ATOMIC_RELAXED);
      __atomic_add_fetch(&copy->storage->saved_refs, 1, __ATOMIC_RELAXED);
      attn_tensor_release(s);
      node->saved[i] = copy;
      node->saved_version[i] = copy->storage->version;
    }
  }
  if (st == ATTN_OK) {
    bool prev = attn_set_grad_enabled(false);
    st = attn_copy_(target, result);
    attn_set_grad_enabled(prev);
  }
  if (st == ATTN_OK && node) {
    struct attn_autograd *ag = ag_get(target);
    if (!ag) {
      st = attn_set_error(ATTN_ERR_NOMEM, "in-place: out of memory");
    } else {
      if (ag->grad_fn) node_release(ag->grad_fn);
      ag->grad_fn = node_retain(node);
      ag->requires_grad = true;
    }
  }
  attn_tensor_release(result);
  return st;
}

/* SPDX-License-Identifier: MIT */
/* Autograd's graph: the records tensors carry, the nodes and edges that
 * recorded ops build, and the tensor-level autograd API.  It knows no
 * formula (only custom nodes' attn__custom_backward, which calls the
 * caller's function): forward ops record here by formula id (graph floor
 * below the ops), the engine (backward/autograd.c, the top of the core)
 * runs each node's formula from the one table attn__formulas.
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
#include "autograd/autograd.h"

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

struct attn_autograd *attn__ag_get(attn_tensor *t) {
  if (!t->autograd) {
    t->autograd = attn__calloc(1, sizeof *t->autograd);
    /* tensor.c frees the record through this, without calling up here */
    if (t->autograd) t->autograd->release = attn__autograd_release;
  }
  return t->autograd;
}

void attn__node_free_saved(attn_node *n) {
  for (int i = 0; i < ATTN_NODE_SAVED; i++) {
    if (n->saved[i]) __atomic_sub_fetch(&n->saved[i]->storage->saved_refs, 1, __ATOMIC_RELAXED);
    attn_tensor_release(n->saved[i]);
    n->saved[i] = NULL;
  }
  if (n->extra_free)
    n->extra_free(n->extra);
  else
    free(n->extra);
  n->extra = NULL;
}

/* Nodes form chains as long as a training sequence; release iteratively
   so that dropping a 100k-node graph cannot overflow the C stack. */
void attn__node_release(attn_node *n) {
  attn_node *stack_small[64];
  attn_node **stack = stack_small;
  size_t cap = 64, top = 0;
  if (!n) return;
  stack[top++] = n;
  while (top) {
    attn_node *cur = stack[--top];
    if (__atomic_sub_fetch(&cur->refcount, 1, __ATOMIC_ACQ_REL) != 0) continue;
    attn__node_free_saved(cur);
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
          attn__node_release(nx);
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
    attn__node_release(ag->grad_fn);
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
attn_node *attn__edge_target(attn_tensor *t) {
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

attn_status attn__ag_record(attn_tensor *out, const char *name, attn__formula f, int n,
                            const attn_tensor *const *inputs, int nsave, const attn_tensor *const *saved,
                            attn_node **node_out) {
  attn_node *node = node_alloc(name, n);
  if (!node) return attn__nomem(name, (int64_t)(sizeof(attn_node) + (size_t)n * sizeof(attn__edge)));
  node->formula = f;
  for (int i = 0; i < n; i++) {
    attn__edge *e = &node->next[i];
    if (!inputs[i]) continue;
    e->ndim = inputs[i]->ndim;
    memcpy(e->shape, inputs[i]->shape, sizeof e->shape);
    if (attn_requires_grad(inputs[i])) {
      e->node = attn__edge_target((attn_tensor *)inputs[i]);
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
  struct attn_autograd *ag = attn__ag_get(out);
  if (!ag) goto oom;
  if (ag->grad_fn) attn__node_release(ag->grad_fn);
  ag->requires_grad = true;
  ag->grad_fn = node;
  if (node_out) *node_out = node;
  return ATTN_OK;
oom:
  attn__node_release(node);
  return attn__nomem(name, (int64_t)sizeof(attn_tensor));
}

/* ------------------------------------------------------------------------ */
/* Public tensor-level API                                                   */

attn_status attn_requires_grad_(attn_tensor *t, bool on) {
  if (on && attn_dtype_is_storage(t->dtype))
    return attn_set_error(ATTN_ERR_ARG,
                          "requires_grad_: %s is a storage dtype (attn computes and differentiates in float32): "
                          "convert it with x:float() and make that require grad",
                          attn_dtype_name(t->dtype));
  if (on && t->dtype != ATTN_FLOAT32)
    return attn_set_error(ATTN_ERR_ARG, "requires_grad_: only floating point tensors can require gradients (got %s)",
                          attn_dtype_name(t->dtype));
  if (t->autograd && t->autograd->grad_fn) {
    if (on) return ATTN_OK;
    return attn_set_error(ATTN_ERR_STATE,
                          "requires_grad_: only leaf tensors can stop requiring grad; use detach() for a non-leaf");
  }
  if (!on && !t->autograd) return ATTN_OK;
  struct attn_autograd *ag = attn__ag_get(t);
  if (!ag) return attn_set_error(ATTN_ERR_NOMEM, "requires_grad_: out of memory");
  ag->requires_grad = on;
  return ATTN_OK;
}

bool attn_is_leaf(const attn_tensor *t) { return !t->autograd || !t->autograd->grad_fn; }

attn_tensor *attn_grad(const attn_tensor *t) { return t->autograd ? t->autograd->grad : NULL; }

attn_status attn_set_grad(attn_tensor *t, attn_tensor *g) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  /* torch's two checks: an optimizer would step with an int64 or bool .grad,
     and backward could not add a float gradient into it */
  if (g && g->dtype != t->dtype)
    return attn_set_error(ATTN_ERR_ARG,
                          "set_grad: assigned grad has data of a different type: %s for a %s tensor (assign "
                          "g:to(x.dtype), e.g. g:float())",
                          attn_dtype_name(g->dtype), attn_dtype_name(t->dtype));
  if (g && !attn_same_shape(t, g))
    return attn_set_error(ATTN_ERR_SHAPE,
                          "set_grad: assigned grad has data of a different size: gradient of shape %s for a tensor of "
                          "shape %s (assign a gradient of the tensor's shape)",
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
  struct attn_autograd *ag = attn__ag_get(t);
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
  struct attn_autograd *ag = attn__ag_get(t);
  if (!ag) return attn_set_error(ATTN_ERR_NOMEM, "set_grad_hook: out of memory");
  ag->hook = fn;
  ag->hook_ctx = fn ? ctx : NULL;
  return ATTN_OK;
}

void *attn_grad_hook_ctx(const attn_tensor *t) {
  return t->autograd && t->autograd->hook ? t->autograd->hook_ctx : NULL;
}

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

attn_status attn__custom_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
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
  attn_status st = attn__ag_record(out, name, ATTN__F_CUSTOM, n, inputs, 0, NULL, &node);
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
  if (!attn_requires_grad(t)) return attn_set_error(ATTN_ERR_STATE, "retain_grad: the tensor does not require grad");
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
      if ((st = attn__clone_raw(s, &copy))) break;
      __atomic_sub_fetch(&s->storage->saved_refs, 1, __ATOMIC_RELAXED);
      __atomic_add_fetch(&copy->storage->saved_refs, 1, __ATOMIC_RELAXED);
      attn_tensor_release(s);
      node->saved[i] = copy;
      node->saved_version[i] = copy->storage->version;
    }
  }
  if (st == ATTN_OK) {
    bool prev = attn_set_grad_enabled(false);
    st = attn__copy_raw(target, result);
    attn_set_grad_enabled(prev);
  }
  if (st == ATTN_OK && node) {
    struct attn_autograd *ag = attn__ag_get(target);
    if (!ag) {
      st = attn_set_error(ATTN_ERR_NOMEM, "in-place: out of memory");
    } else {
      if (ag->grad_fn) attn__node_release(ag->grad_fn);
      ag->grad_fn = node_retain(node);
      ag->requires_grad = true;
    }
  }
  attn_tensor_release(result);
  return st;
}

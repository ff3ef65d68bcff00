/* SPDX-License-Identifier: MIT */
/* The backward engine: walks the graph that graph.c records, looks up each
 * node's backward by its formula id (attn__formulas, formulas.c) and
 * accumulates the gradients with the ops.
 * The top floor of the core: it may call everything below it and nothing
 * below calls it.
 */
#include "backward/backward.h"

#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------ */
/* Gradient helpers                                                          */

/* Whether g is a plain buffer nothing else references: a fresh gradient
   the engine alone holds (one tensor reference, one storage reference, all
   of its own attn-allocated storage, contiguous). */
static bool owned_alone(const attn_tensor *g) {
  const attn_storage *s = g->storage;
  return __atomic_load_n(&g->refcount, __ATOMIC_ACQUIRE) == 1 && __atomic_load_n(&s->refcount, __ATOMIC_ACQUIRE) == 1 &&
         !g->autograd && !s->release && !s->release_ctx && g->offset == 0 && s->numel == attn_tensor_numel(g) &&
         attn_tensor_is_contiguous(g);
}

/* acc += g: in place when the running sum is a buffer nothing else holds
   (the same bits), else out of place (acc may be g itself, an alias of
   saved data or of the incoming grad). */
static attn_status accumulate(attn_tensor **acc, attn_tensor *g) {
  if (!*acc) {
    *acc = attn_tensor_retain(g);
    return ATTN_OK;
  }
  if (owned_alone(*acc) && (*acc)->storage != g->storage && attn_same_shape(*acc, g))
    return attn_binary_(ATTN_ADD, *acc, g);
  attn_tensor *sum;
  attn_status st = attn_binary(ATTN_ADD, *acc, g, &sum);
  if (st) return st;
  attn_tensor_release(*acc);
  *acc = sum;
  return ATTN_OK;
}

/* leaf.grad += g: the first gradient is stored as its own contiguous
   buffer (never an alias of graph data: g itself when the engine holds it
   alone, as torch's AccumulateGrad steals it, else a copy); later ones are
   added in place. */
static attn_status accumulate_leaf(attn_tensor *leaf, attn_tensor *g) {
  struct attn_autograd *ag = attn__ag_get(leaf);
  if (!ag) return attn_set_error(ATTN_ERR_NOMEM, "backward: out of memory");
  if (!ag->grad) {
    if (!owned_alone(g)) return attn_clone(g, &ag->grad);
    ag->grad = attn_tensor_retain(g);
    return ATTN_OK;
  }
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

/* Whether t has the shape of edge e's input. */
static bool edge_shape(const attn__edge *e, const attn_tensor *t) {
  if (t->ndim != e->ndim) return false;
  for (int d = 0; d < e->ndim; d++)
    if (t->shape[d] != e->shape[d]) return false;
  return true;
}

/* attn__grad_into's tensor for edge e of node (whose incoming gradient is
   g), or NULL: the leaf's .grad, or a non-leaf input's running sum. */
static attn_tensor *grad_into_target(const attn_node *node, const attn__edge *e, const attn_tensor *g) {
  const attn_node *n = e->node;
  if (!n) return NULL;
  if (!n->leaf) {
    /* a node's running sum, when it has one the engine alone holds: the
       formula adds into it what accumulate would add (the same bits) */
    attn_tensor *acc = n->grad_acc; /* owned alone: no storage shared with g or saved tensors */
    return acc && acc->dtype == ATTN_FLOAT32 && owned_alone(acc) && edge_shape(e, acc) ? acc : NULL;
  }
  /* the leaf's last edge still to come, and nothing summed for it yet */
  if (n->deps != 1 || n->grad_acc) return NULL;
  const struct attn_autograd *ag = n->leaf->autograd;
  attn_tensor *gr = ag ? ag->grad : NULL;
  if (!gr || gr->dtype != ATTN_FLOAT32 || !edge_shape(e, gr) || !attn_tensor_is_contiguous(gr)) return NULL;
  if (gr->storage == g->storage) return NULL;
  for (int k = 0; k < ATTN_NODE_SAVED; k++)
    if (node->saved[k] && node->saved[k]->storage == gr->storage) return NULL;
  return gr;
}

static attn_status run_node(attn_node *node, attn_tensor *g, bool retain_graph, node_vec *ready) {
  attn_status st = ATTN_OK;
  /* a non-leaf that retains grad accumulates over backward calls, like a
     leaf (torch's retain_grad hook) */
  if (node->retained && (st = accumulate_leaf(node->retained, g))) return st;
  if (node->leaf) {
    /* a formula may have added the gradient already (attn__grad_into) */
    if (!node->grad_added && (st = accumulate_leaf(node->leaf, g))) return st;
    node->grad_added = false;
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
  /* one load per node: the table is complete (formulas.c) */
  attn__backward_fn fn = (unsigned)node->formula < ATTN__F_COUNT ? attn__formulas[node->formula] : NULL;
  for (int i = 0; i < node->n_next; i++) {
    attn_tensor *into = grad_into_target(node, &node->next[i], g);
    /* none where two inputs are one node (q = k = v): each gradient would
       be added into the same sum while the others are computed */
    for (int j = 0; j < node->n_next && into; j++)
      if (j != i && node->next[j].node == node->next[i].node) into = NULL;
    node->next[i].into = into;
  }
  st = fn ? fn(node, g, gs) : attn_set_error(ATTN_ERR_STATE, "backward: %s has no backward formula", node->name);
  for (int i = 0; i < node->n_next && st == ATTN_OK; i++) {
    attn__edge *e = &node->next[i];
    if (!e->node) continue;
    if (gs[i] && gs[i] == e->into) { /* added into the leaf's .grad or the node's sum: nothing to sum */
      if (e->node->leaf) e->node->grad_added = true;
      if (--e->node->deps == 0 && !vec_push(ready, e->node))
        st = attn_set_error(ATTN_ERR_NOMEM, "backward: out of memory");
      continue;
    }
    if (!gs[i]) {
      st = attn_set_error(ATTN_ERR_STATE, "backward: %s gave no gradient for input %d", node->name, i);
      break;
    }
    if (!edge_shape(e, gs[i])) {
      char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
      st = attn_set_error(ATTN_ERR_SHAPE, "backward: %s gave a gradient of shape %s for an input of shape %s",
                          node->name, ATTN_SHAPE(gs[i], sa), attn_shape_str(e->ndim, e->shape, sb, sizeof sb));
      break;
    }
    if (gs[i]->dtype != ATTN_FLOAT32) { /* a custom C backward's int64/bool gradient: cast like torch */
      attn_tensor *f;
      if ((st = attn_to_dtype(gs[i], ATTN_FLOAT32, &f))) break;
      attn_tensor_release(gs[i]);
      gs[i] = f;
    }
    if ((st = accumulate(&e->node->grad_acc, gs[i]))) break;
    if (--e->node->deps == 0 && !vec_push(ready, e->node))
      st = attn_set_error(ATTN_ERR_NOMEM, "backward: out of memory");
  }
  for (int i = 0; i < node->n_next; i++) {
    attn_tensor_release(gs[i]);
    node->next[i].into = NULL;
  }
  if (gs != grads) free(gs);
  if (st == ATTN_OK && !retain_graph) {
    /* Like torch, only a node whose saved state was freed refuses a second
       pass; nodes that saved nothing (views, add, neg) may run again. */
    bool had_state = node->extra != NULL;
    for (int i = 0; i < ATTN_NODE_SAVED; i++) had_state = had_state || node->saved[i];
    attn__node_free_saved(node);
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
    if (grad->dtype != t->dtype) { /* torch casts the given gradient to t's dtype: an int64 seed never
                                      reaches a float .grad */
      if ((st = attn_to_dtype(grad, t->dtype, &seed))) return st;
    } else {
      seed = attn_tensor_retain((attn_tensor *)grad);
    }
  } else {
    if (attn_tensor_numel(t) != 1)
      return attn_set_error(ATTN_ERR_SHAPE,
                            "backward: a gradient can be implied only for a tensor with one element, got %s; "
                            "pass the gradient",
                            ATTN_SHAPE(t, sa));
    if ((st = attn_full(t->ndim, t->shape, 1.0f, &seed))) return st;
  }
  bool prev = attn_set_grad_enabled(false);
  attn_node *root = attn__edge_target(t);
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
        nx->grad_added = false;
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
  attn__node_release(root);
  attn_set_grad_enabled(prev);
  return st;
}

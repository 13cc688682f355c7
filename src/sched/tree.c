/* The tenant tree: groups, and each active queue's share of the store.
 *
 * Hierarchical share is flattened onto the one B-WF2Q+ order of wf2q.c,
 * as the kernel's io.cost flattens its hierarchy into one weight per
 * cgroup: an active node's share is its parent's share times its weight
 * over the weights of its parent's active children, and an active queue is
 * scheduled with its share as its weight (ent.weight, in SHARE_ONE units).
 * The root's children keep their weights as shares (weight * SHARE_ONE):
 * the root's sum is wq.wsum itself, so a flat set of queues is scheduled
 * exactly as without a tree, and a child going active at the root changes
 * nobody else's weight.
 *
 * A node going active or idle changes the sum of its parent's active
 * children, and of its grandparent's too if the parent goes active or idle
 * with it; the shares below the highest group whose sum changed are
 * recomputed, and every active queue among them has its weight changed in
 * place the way sched_queue_set_weight does (start tag kept, what is left
 * to run rescaled). A group's share stays its own while its children come
 * and go: they divide it, and never add to it.
 *
 * Everything else (slices, budgets, idling, injection, deep queues, caps)
 * sees queues and their weights as before: the share a queue's weight
 * stands for is what those mechanisms protect.
 */
#include "sched_internal.h"

#include <errno.h>
#include <stdlib.h>

static struct sched_queue *queue_of_node(struct sched_node *n)
{
	return (struct sched_queue *)((char *)n - offsetof(struct sched_queue, node));
}

static struct sched_group *group_of_node(struct sched_node *n)
{
	return (struct sched_group *)((char *)n - offsetof(struct sched_group, node));
}

uint64_t sched_tree_share(const struct sched_node *n)
{
	const struct sched_group *g = n->parent;
	if (!g)
		return (uint64_t)n->weight * SHARE_ONE;
	if (!g->active_wsum)
		return 1;
	uint64_t share = g->share * n->weight / g->active_wsum;
	return share ? share : 1;
}

/* An active queue's weight in virtual time becomes share: keep its place
 * (start tag), rescale what is left of its slice, and keep the sums the
 * weight is counted in. */
static void queue_share_set(struct sched *s, struct sched_queue *q, uint64_t share)
{
	uint32_t old = q->ent.weight;
	uint32_t w = share > UINT32_MAX ? UINT32_MAX : (uint32_t)share;
	if (w == old)
		return;
	uint64_t len = q->ent.finish_vt - q->ent.start_vt;
	q->ent.finish_vt = q->ent.start_vt + (uint64_t)((unsigned __int128)len * old / w);
	q->ent.weight = w;
	if (q->weighed)
		s->wq.wsum = s->wq.wsum - old + w;
	sched_wf2q_reposition(&s->wq, &q->ent);
}

static void node_share_set(struct sched *s, struct sched_node *n);

/* g's share is set: its active children's follow. */
static void subtree_update(struct sched *s, struct sched_group *g)
{
	struct sched_link *pos;
	sched_list_foreach(pos, &g->active)
		node_share_set(s, sched_list_entry(pos, struct sched_node, active_link));
}

static void node_share_set(struct sched *s, struct sched_node *n)
{
	uint64_t share = sched_tree_share(n);
	if (!n->is_group) {
		queue_share_set(s, queue_of_node(n), share);
		return;
	}
	struct sched_group *g = group_of_node(n);
	g->share = share;
	subtree_update(s, g);
}

/* n, active, joins its parent's active children; so does every ancestor
 * that was idle. Then the shares below the highest sum that changed. */
static void link_up(struct sched *s, struct sched_node *n)
{
	struct sched_node *top = n;
	struct sched_group *g = n->parent;
	for (; g; top = &g->node, g = g->node.parent) {
		sched_list_add_tail(&g->active, &top->active_link);
		g->active_wsum += top->weight;
		if (g->node.active)
			break;
		g->node.active = true;
	}
	if (g)
		subtree_update(s, g);
	else
		node_share_set(s, top);
}

/* n leaves its parent's active children; an ancestor left with none
 * leaves its own parent's. */
static void unlink_up(struct sched *s, struct sched_node *n)
{
	struct sched_node *top = n;
	struct sched_group *g = n->parent;
	for (; g; top = &g->node, g = g->node.parent) {
		sched_list_remove(&top->active_link);
		g->active_wsum -= top->weight;
		if (g->active_wsum)
			break;
		g->node.active = false;
	}
	if (g)
		subtree_update(s, g);
}

void sched_tree_activate(struct sched *s, struct sched_node *n)
{
	if (n->active)
		return;
	n->active = true;
	link_up(s, n);
}

void sched_tree_deactivate(struct sched *s, struct sched_node *n)
{
	if (!n->active)
		return;
	n->active = false;
	unlink_up(s, n);
}

static void group_free_if_done(struct sched_group *g);

/* n moves under parent; an active n takes its activity along. */
static void node_reparent(struct sched *s, struct sched_node *n, struct sched_group *parent)
{
	struct sched_group *old = n->parent;
	if (old == parent)
		return;
	if (n->active)
		unlink_up(s, n);
	n->parent = parent;
	if (parent)
		parent->children++;
	if (n->active)
		link_up(s, n);
	if (old) {
		old->children--;
		group_free_if_done(old);
	}
}

/* A node's weight among its siblings changes. */
static void node_weight_set(struct sched *s, struct sched_node *n, uint32_t weight)
{
	if (n->active && n->parent) {
		n->parent->active_wsum = n->parent->active_wsum - n->weight + weight;
		n->weight = weight;
		subtree_update(s, n->parent);
		return;
	}
	n->weight = weight;
	if (n->active)
		node_share_set(s, n);
	else if (!n->is_group)
		queue_of_node(n)->ent.weight = (uint32_t)sched_tree_share(n);
}

static void group_free_if_done(struct sched_group *g)
{
	while (g && g->detached && !g->children) {
		struct sched_group *parent = g->node.parent;
		sched_list_remove(&g->all_link);
		free(g);
		if (parent)
			parent->children--;
		g = parent;
	}
}

void sched_tree_queue_gone(struct sched_queue *q)
{
	struct sched_group *g = q->node.parent;
	if (g) {
		g->children--;
		group_free_if_done(g);
	}
}

void sched_tree_free_all(struct sched *s)
{
	struct sched_link *pos, *tmp;
	sched_list_foreach_safe(pos, tmp, &s->all_groups)
		free(sched_list_entry(pos, struct sched_group, all_link));
}

/* ---- public ---- */

static bool weight_valid(uint32_t w)
{
	return w >= SCHED_WEIGHT_MIN && w <= SCHED_WEIGHT_MAX;
}

struct sched_group *sched_group_find(const struct sched *s, uint64_t group_id)
{
	struct sched_link *pos;
	sched_list_foreach(pos, &s->all_groups) {
		struct sched_group *g = sched_list_entry(pos, struct sched_group, all_link);
		if (g->group_id == group_id && !g->detached)
			return g;
	}
	return NULL;
}

int sched_group_get(struct sched *s, uint64_t group_id, struct sched_group *parent,
		    uint32_t weight, struct sched_group **out)
{
	if (!weight)
		weight = s->p.default_weight;
	if (!weight_valid(weight) || group_id == SCHED_GROUP_NONE)
		return -EINVAL;
	struct sched_group *g = sched_group_find(s, group_id);
	if (g) {
		*out = g;
		return 0;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->group_id = group_id;
	g->node.is_group = true;
	g->node.weight = weight;
	g->node.parent = parent;
	if (parent)
		parent->children++;
	sched_list_init(&g->active);
	sched_list_add_tail(&s->all_groups, &g->all_link);
	*out = g;
	return 0;
}

int sched_group_set_weight(struct sched *s, struct sched_group *g, uint32_t weight)
{
	if (!weight_valid(weight))
		return -EINVAL;
	node_weight_set(s, &g->node, weight);
	return 0;
}

int sched_group_set_parent(struct sched *s, struct sched_group *g, struct sched_group *parent)
{
	for (const struct sched_group *a = parent; a; a = a->node.parent)
		if (a == g)
			return -EINVAL;
	node_reparent(s, &g->node, parent);
	return 0;
}

void sched_group_remove(struct sched *s, struct sched_group *g)
{
	(void)s; /* the tree's state is in its groups */
	g->detached = true;
	group_free_if_done(g);
}

void sched_queue_set_parent(struct sched *s, struct sched_queue *q, struct sched_group *parent)
{
	node_reparent(s, &q->node, parent);
	if (!q->node.active)
		q->ent.weight = (uint32_t)sched_tree_share(&q->node);
}

int sched_queue_set_weight(struct sched *s, struct sched_queue *q, uint32_t weight)
{
	if (!weight_valid(weight))
		return -EINVAL;
	node_weight_set(s, &q->node, weight);
	return 0;
}

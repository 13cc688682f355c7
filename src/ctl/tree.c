/*
 * The tenant tree of one stat reply: who is whose parent, what each node
 * should get, what each subtree got, and the order the table prints it in.
 * Pure functions over arrays, so they are tested without a daemon.
 */
#include "ctl_internal.h"

#include <errno.h>
#include <stdlib.h>

struct id_index {
	uint32_t id;
	size_t index;
};

static int id_index_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct id_index *)a)->id, y = ((const struct id_index *)b)->id;
	return x < y ? -1 : x > y;
}

/* Depth of every node from UP: one walk per unvisited chain, a parent cycle cut at the node where it closes. */
static int tree_depths(size_t *up, size_t n, unsigned *depth)
{
	unsigned char *state = calloc(n ? n : 1, 1); /* 0 new, 1 on the current chain, 2 done */
	size_t *chain = malloc((n ? n : 1) * sizeof(*chain));
	if (!state || !chain) {
		free(state);
		free(chain);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		size_t len = 0, j = i;
		while (j != CTL_TREE_ROOT && state[j] == 0) {
			state[j] = 1;
			chain[len++] = j;
			j = up[j];
		}
		if (j != CTL_TREE_ROOT && state[j] == 1) {
			/* A cycle (a table bug or a race): its first node seen becomes a root. */
			up[j] = CTL_TREE_ROOT;
			depth[j] = 0;
			state[j] = 2;
		}
		/*
		 * Each chain node's parent is the next one, the last's is J: done,
		 * a root or the node just cut (skipped here). So back from the top
		 * every parent's depth is known before its child's.
		 */
		for (size_t k = len; k-- > 0;) {
			size_t x = chain[k];
			if (state[x] == 2)
				continue;
			depth[x] = up[x] == CTL_TREE_ROOT ? 0 : depth[up[x]] + 1;
			state[x] = 2;
		}
	}
	free(state);
	free(chain);
	return 0;
}

int ctl_tree_link(const struct ctl_tree_node *nodes, size_t n, size_t *up, unsigned *depth)
{
	struct id_index *ix = malloc((n ? n : 1) * sizeof(*ix));
	if (!ix)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		ix[i] = (struct id_index){.id = nodes[i].id, .index = i};
	qsort(ix, n, sizeof(*ix), id_index_cmp);
	for (size_t i = 0; i < n; i++) {
		up[i] = CTL_TREE_ROOT;
		if (nodes[i].parent == TENANT_ID_NONE || nodes[i].parent == nodes[i].id)
			continue;
		struct id_index key = {.id = nodes[i].parent};
		const struct id_index *p = bsearch(&key, ix, n, sizeof(*ix), id_index_cmp);
		if (p)
			up[i] = p->index;
	}
	free(ix);
	return tree_depths(up, n, depth);
}

/* Indices of the nodes by increasing depth: a counting sort (depths are below N), START N + 1 long. */
static void by_depth(const unsigned *depth, size_t n, size_t *start, size_t *order)
{
	for (size_t d = 0; d <= n; d++)
		start[d] = 0;
	for (size_t i = 0; i < n; i++)
		start[depth[i] + 1]++;
	for (size_t d = 1; d <= n; d++)
		start[d] += start[d - 1];
	for (size_t i = 0; i < n; i++)
		order[start[depth[i]]++] = i;
}

/* UP, DEPTH and the by-depth ORDER of NODES, in one allocation the caller frees (*up). */
static int tree_prepare(const struct ctl_tree_node *nodes, size_t n, size_t **up, unsigned **depth,
			size_t **order)
{
	size_t m = n ? n : 1;
	*up = malloc((3 * m + 1) * sizeof(size_t) + m * sizeof(unsigned));
	if (!*up)
		return -ENOMEM;
	*order = *up + m;
	size_t *start = *order + m;
	*depth = (unsigned *)(start + m + 1);
	int r = ctl_tree_link(nodes, n, *up, *depth);
	if (r < 0) {
		free(*up);
		return r;
	}
	by_depth(*depth, n, start, *order);
	return 0;
}

int ctl_tree_target_shares(const struct ctl_tree_node *nodes, size_t n, double *target)
{
	size_t *up, *order;
	unsigned *depth;
	int r = tree_prepare(nodes, n, &up, &depth, &order);
	if (r < 0)
		return r;
	bool *counts = calloc(n ? n : 1, sizeof(*counts));
	/* Sibling weight sums by parent index; the top level's at index N. */
	uint64_t *sum = calloc(n + 1, sizeof(*sum));
	if (!counts || !sum) {
		free(counts);
		free(sum);
		free(up);
		return -ENOMEM;
	}
	bool any_active = false;
	for (size_t i = 0; i < n; i++)
		any_active |= nodes[i].active;
	/* With nobody active, the target is what each would get if all competed (as when flat). */
	for (size_t i = 0; i < n; i++)
		counts[i] = nodes[i].active || !any_active;
	/* A node competes at its level while it or any descendant is active: deepest first. */
	for (size_t k = n; k-- > 0;) {
		size_t i = order[k];
		if (counts[i] && up[i] != CTL_TREE_ROOT)
			counts[up[i]] = true;
	}
	for (size_t i = 0; i < n; i++)
		if (counts[i])
			sum[up[i] == CTL_TREE_ROOT ? n : up[i]] += nodes[i].weight;
	/* Shallowest first, so a parent's target is known before its children's. */
	for (size_t k = 0; k < n; k++) {
		size_t i = order[k];
		uint64_t s = sum[up[i] == CTL_TREE_ROOT ? n : up[i]];
		double above = up[i] == CTL_TREE_ROOT ? 1.0 : target[up[i]];
		/* weight / sum first: at the top level exactly the flat weight / sum. */
		target[i] = counts[i] && s ? above * ((double)nodes[i].weight / (double)s) : 0;
	}
	free(counts);
	free(sum);
	free(up);
	return 0;
}

int ctl_tree_subtree_sums(const struct ctl_tree_node *nodes, size_t n, const uint64_t *own,
			  uint64_t *subtree)
{
	size_t *up, *order;
	unsigned *depth;
	int r = tree_prepare(nodes, n, &up, &depth, &order);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		subtree[i] = own[i];
	for (size_t k = n; k-- > 0;) {
		size_t i = order[k];
		if (up[i] != CTL_TREE_ROOT)
			subtree[up[i]] += subtree[i];
	}
	free(up);
	return 0;
}

int ctl_tree_order(const size_t *up, size_t n, const size_t *rank, size_t *order)
{
	size_t m = n ? n : 1;
	size_t *first = malloc(3 * m * sizeof(size_t));
	if (!first)
		return -ENOMEM;
	size_t *next = first + m, *last = next + m; /* children lists; LAST: their tails */
	size_t roots = CTL_TREE_ROOT, roots_last = CTL_TREE_ROOT;
	for (size_t i = 0; i < n; i++)
		first[i] = next[i] = last[i] = CTL_TREE_ROOT;
	/* Appended in RANK order, so every list is sorted as RANK sorts. */
	for (size_t k = 0; k < n; k++) {
		size_t x = rank[k];
		size_t *head = up[x] == CTL_TREE_ROOT ? &roots : &first[up[x]];
		size_t *tail = up[x] == CTL_TREE_ROOT ? &roots_last : &last[up[x]];
		if (*head == CTL_TREE_ROOT)
			*head = x;
		else
			next[*tail] = x;
		*tail = x;
	}
	/* Pre-order without a stack: down to a child, else on to the next sibling of the nearest ancestor that has one. */
	size_t k = 0;
	for (size_t x = roots; x != CTL_TREE_ROOT && k < n;) {
		order[k++] = x;
		if (first[x] != CTL_TREE_ROOT) {
			x = first[x];
			continue;
		}
		while (x != CTL_TREE_ROOT && next[x] == CTL_TREE_ROOT)
			x = up[x];
		if (x != CTL_TREE_ROOT)
			x = next[x];
	}
	free(first);
	return 0;
}

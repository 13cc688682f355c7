/* The engine's buffer pool: alignment, reuse, slabs changing size, fallbacks, threads. */
#include "fusesched/bufpool.h"

#include <check.h>
#include <stdio.h>
#include <unistd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1u << 20)

static struct bufpool *pool_of(size_t arena_bytes)
{
	struct bufpool *p = NULL;
	ck_assert_int_eq(bufpool_new(arena_bytes, &p), 0);
	return p;
}

/* This process's resident set, from /proc/self/statm (pages). */
static long resident_kib(void)
{
	long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (!f || fscanf(f, "%ld %ld", &size, &resident) != 2)
		ck_abort_msg("cannot read /proc/self/statm");
	fclose(f);
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

START_TEST(blocks_are_aligned_inside_the_arena_and_reused)
{
	struct bufpool *p = pool_of(4 * MIB);
	struct iovec arena = bufpool_arena(p);
	ck_assert_uint_eq(arena.iov_len, 4 * MIB);
	void *a = bufpool_get(p, 4096);
	void *b = bufpool_get(p, 5000); /* 8 KiB class: its own slab */
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert(bufpool_in_arena(p, a) && bufpool_in_arena(p, b));
	ck_assert_uint_eq((uintptr_t)a % BUFPOOL_ALIGN_BYTES, 0);
	ck_assert_uint_eq((uintptr_t)b % BUFPOOL_ALIGN_BYTES, 0);
	ck_assert_uint_eq(bufpool_slabs_used(p), 2);
	memset(b, 0xab, 5000); /* the whole request fits */
	bufpool_put(p, a);
	ck_assert_uint_eq(bufpool_slabs_used(p), 1);
	void *again = bufpool_get(p, 100);
	ck_assert_ptr_eq(again, a); /* the freed slab is taken again, not a new one */
	bufpool_put(p, again);
	bufpool_put(p, b);
	ck_assert_uint_eq(bufpool_slabs_used(p), 0);
	ck_assert_uint_eq(bufpool_heap_fallbacks(p), 0);
	bufpool_free(p);
}
END_TEST

START_TEST(a_freed_slab_serves_another_size)
{
	struct bufpool *p = pool_of(1 * MIB); /* one slab */
	void *small[256];
	for (int i = 0; i < 256; i++) {
		small[i] = bufpool_get(p, 4096);
		ck_assert(bufpool_in_arena(p, small[i]));
	}
	void *big = bufpool_get(p, MIB); /* the slab is all 4 KiB blocks: heap */
	ck_assert(!bufpool_in_arena(p, big));
	ck_assert_uint_eq(bufpool_heap_fallbacks(p), 1);
	bufpool_put(p, big);
	for (int i = 0; i < 256; i++)
		bufpool_put(p, small[i]);
	big = bufpool_get(p, MIB);
	ck_assert(bufpool_in_arena(p, big));
	ck_assert_uint_eq(bufpool_heap_fallbacks(p), 1);
	bufpool_put(p, big);
	bufpool_free(p);
}
END_TEST

START_TEST(oversized_and_arenaless_requests_use_the_heap)
{
	struct bufpool *p = pool_of(2 * MIB);
	void *huge = bufpool_get(p, MIB + 1);
	ck_assert_ptr_nonnull(huge);
	ck_assert(!bufpool_in_arena(p, huge));
	ck_assert_uint_eq((uintptr_t)huge % BUFPOOL_ALIGN_BYTES, 0);
	memset(huge, 1, MIB + 1);
	ck_assert_uint_ge(bufpool_heap_bytes(p), MIB + 1);
	bufpool_put(p, huge);
	ck_assert_uint_eq(bufpool_heap_bytes(p), 0); /* not the cached size: unmapped at once */
	bufpool_put(p, NULL);
	bufpool_free(p);

	p = pool_of(0);
	ck_assert_uint_eq(bufpool_arena(p).iov_len, 0);
	void *h = bufpool_get(p, 0);
	ck_assert_ptr_nonnull(h);
	ck_assert(!bufpool_in_arena(p, h));
	bufpool_put(p, h);
	bufpool_free(p);
}
END_TEST

/*
 * Heap buffers smaller than 1 MiB are kept too, by block size: a flood of
 * 128 KiB payloads maps each once, not once per request, and a 100 KiB
 * request takes a kept 128 KiB mapping.
 */
START_TEST(smaller_heap_buffers_are_kept_by_size)
{
	struct bufpool *p = pool_of(0);
	enum { FLOOD = 16 };
	const size_t block = 128 << 10;
	void *held[FLOOD];
	for (int i = 0; i < FLOOD; i++) {
		held[i] = bufpool_get(p, block);
		memset(held[i], 0x5a, block);
	}
	size_t mapped = bufpool_heap_bytes(p);
	ck_assert_uint_eq(mapped, FLOOD * (block + BUFPOOL_ALIGN_BYTES));
	for (int i = 0; i < FLOOD; i++)
		bufpool_put(p, held[i]);
	ck_assert_uint_eq(bufpool_heap_bytes(p), mapped);
	for (int i = 0; i < FLOOD; i++) {
		held[i] = bufpool_get(p, i % 2 ? block : 100 << 10);
		memset(held[i], 0xa5, i % 2 ? block : 100 << 10);
	}
	ck_assert_uint_eq(bufpool_heap_bytes(p), mapped); /* nothing new mapped */
	/* A kept mapping of one size does not serve another. */
	void *mib = bufpool_get(p, MIB);
	ck_assert_uint_eq(bufpool_heap_bytes(p), mapped + MIB + BUFPOOL_ALIGN_BYTES);
	bufpool_put(p, mib);
	for (int i = 0; i < FLOOD; i++)
		bufpool_put(p, held[i]);
	ck_assert_uint_eq(bufpool_trim(p, SIZE_MAX), 0); /* all taken since the pool began */
	ck_assert_uint_eq(bufpool_trim(p, SIZE_MAX), FLOOD + 1);
	ck_assert_uint_eq(bufpool_heap_bytes(p), 0);
	bufpool_free(p);
}
END_TEST

/* Queued payloads leave half the arena to the requests being dispatched. */
START_TEST(queued_payloads_leave_half_the_arena)
{
	struct bufpool *p = pool_of(4 * MIB);
	void *q[4];
	for (int i = 0; i < 4; i++)
		q[i] = bufpool_get_queued(p, MIB);
	ck_assert(bufpool_in_arena(p, q[0]) && bufpool_in_arena(p, q[1]));
	ck_assert(!bufpool_in_arena(p, q[2]) && !bufpool_in_arena(p, q[3]));
	void *d[2] = {bufpool_get(p, MIB), bufpool_get(p, 4096)};
	ck_assert(bufpool_in_arena(p, d[0]) && bufpool_in_arena(p, d[1]));
	/* A queued payload of a size whose slab has room still fits there. */
	void *small = bufpool_get_queued(p, 4096);
	ck_assert(bufpool_in_arena(p, small));
	bufpool_put(p, small);
	for (int i = 0; i < 4; i++)
		bufpool_put(p, q[i]);
	bufpool_put(p, d[0]);
	bufpool_put(p, d[1]);
	ck_assert_uint_eq(bufpool_slabs_used(p), 0);
	bufpool_free(p);
}
END_TEST

/* A flood's heap buffers go back to the system when given back, not into malloc's arenas. */
START_TEST(heap_buffers_are_returned_to_the_system)
{
	struct bufpool *p = pool_of(0);
	enum { FLOOD = 256 };
	static void *held[FLOOD];
	long before = resident_kib();
	for (int i = 0; i < FLOOD; i++) {
		held[i] = bufpool_get(p, MIB);
		ck_assert_ptr_nonnull(held[i]);
		memset(held[i], 0x5a, MIB);
	}
	ck_assert_uint_eq(bufpool_heap_bytes(p), (size_t)FLOOD * (MIB + BUFPOOL_ALIGN_BYTES));
	ck_assert_int_gt(resident_kib(), before + FLOOD * 1024 / 2);
	for (int i = 0; i < FLOOD; i++)
		bufpool_put(p, held[i]);
	/* Kept for reuse: taking them again maps nothing new. */
	size_t mapped = bufpool_heap_bytes(p);
	for (int i = 0; i < FLOOD; i++)
		held[i] = bufpool_get(p, MIB);
	ck_assert_uint_eq(bufpool_heap_bytes(p), mapped);
	for (int i = 0; i < FLOOD; i++)
		bufpool_put(p, held[i]);
	/* All were taken since the first trim: it keeps them; the next ones unmap them. */
	ck_assert_uint_eq(bufpool_trim(p, FLOOD), 0);
	ck_assert_uint_eq(bufpool_trim(p, FLOOD / 2), FLOOD / 2);
	ck_assert_uint_eq(bufpool_trim(p, FLOOD), FLOOD / 2);
	ck_assert_uint_eq(bufpool_heap_bytes(p), 0);
	/*
	 * 256 MiB were resident; what is left is under a quarter of that
	 * (ASan keeps the shadow of the mappings, an eighth of their size).
	 */
	ck_assert_int_lt(resident_kib(), before + FLOOD * 1024 / 4);
	bufpool_free(p);
}
END_TEST

/* Threads hold blocks of mixed sizes filled with their own mark: an overlap shows as a wrong mark. */
struct churn_arg {
	struct bufpool *pool;
	unsigned int seed;
	int overlaps;
};

static void *churn(void *argp)
{
	struct churn_arg *a = argp;
	enum { HELD = 16, ROUNDS = 20000 };
	unsigned char *held[HELD] = {0};
	size_t bytes[HELD] = {0};
	unsigned char mark = (unsigned char)(a->seed & 0xff);
	for (int r = 0; r < ROUNDS; r++) {
		int slot = rand_r(&a->seed) % HELD;
		if (held[slot]) {
			for (size_t i = 0; i < bytes[slot]; i += 512)
				if (held[slot][i] != mark)
					a->overlaps++;
			bufpool_put(a->pool, held[slot]);
		}
		bytes[slot] = (size_t)4096 << (rand_r(&a->seed) % 9);
		held[slot] = bufpool_get(a->pool, bytes[slot]);
		memset(held[slot], mark, bytes[slot]);
	}
	for (int i = 0; i < HELD; i++)
		bufpool_put(a->pool, held[i]);
	return NULL;
}

START_TEST(threads_never_share_a_block)
{
	struct bufpool *p = pool_of(8 * MIB); /* small: fallbacks happen too */
	enum { THREADS = 4 };
	pthread_t t[THREADS];
	struct churn_arg args[THREADS];
	for (int i = 0; i < THREADS; i++) {
		args[i] = (struct churn_arg){p, 0x11u * (unsigned)(i + 1), 0};
		ck_assert_int_eq(pthread_create(&t[i], NULL, churn, &args[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(args[i].overlaps, 0);
	}
	ck_assert_uint_eq(bufpool_slabs_used(p), 0); /* everything came back */
	ck_assert_uint_gt(bufpool_heap_fallbacks(p), 0);
	bufpool_free(p);
}
END_TEST

/* Takes 8 buffers of 1 MiB and gives them back, until told to stop. */
struct taker_arg {
	struct bufpool *pool;
	atomic_bool *stop;
};

static void *take_and_give_back(void *argp)
{
	struct taker_arg *a = argp;
	enum { HELD = 8 };
	void *b[HELD];
	while (!atomic_load(a->stop)) {
		for (int i = 0; i < HELD; i++) {
			ck_assert_ptr_nonnull(b[i] = bufpool_get(a->pool, MIB));
			memset(b[i], 1, 4096);
		}
		for (int i = 0; i < HELD; i++)
			bufpool_put(a->pool, b[i]);
	}
	return NULL;
}

/*
 * The trim drops its lock for every unmap, and the workers take kept
 * mappings meanwhile (each reads into one): it stops when none is left,
 * whatever it counted at the start; and every mapping is still given back
 * to the system in the end.
 */
START_TEST(trimming_while_others_take_kept_buffers)
{
	struct bufpool *p = pool_of(0); /* heap buffers only */
	enum { THREADS = 4, KEPT = 64, ROUNDS = 200 };
	atomic_bool stop = false;
	struct taker_arg arg = {p, &stop};
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, take_and_give_back, &arg), 0);
	void *held[KEPT];
	for (int round = 0; round < ROUNDS; round++) {
		for (int i = 0; i < KEPT; i++)
			ck_assert_ptr_nonnull(held[i] = bufpool_get(p, MIB));
		for (int i = 0; i < KEPT; i++)
			bufpool_put(p, held[i]);
		bufpool_trim(p, 0);        /* from here, what stays kept counts as unused */
		bufpool_trim(p, SIZE_MAX); /* unmaps while the threads take */
	}
	atomic_store(&stop, true);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	bufpool_trim(p, SIZE_MAX);
	bufpool_trim(p, SIZE_MAX);
	ck_assert_uint_eq(bufpool_heap_bytes(p), 0);
	bufpool_free(p);
}
END_TEST

static Suite *bufpool_suite(void)
{
	Suite *s = suite_create("bufpool");
	TCase *tc = tcase_create("pool");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, blocks_are_aligned_inside_the_arena_and_reused);
	tcase_add_test(tc, a_freed_slab_serves_another_size);
	tcase_add_test(tc, oversized_and_arenaless_requests_use_the_heap);
	tcase_add_test(tc, heap_buffers_are_returned_to_the_system);
	tcase_add_test(tc, smaller_heap_buffers_are_kept_by_size);
	tcase_add_test(tc, queued_payloads_leave_half_the_arena);
	tcase_add_test(tc, threads_never_share_a_block);
	tcase_add_test(tc, trimming_while_others_take_kept_buffers);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(bufpool_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

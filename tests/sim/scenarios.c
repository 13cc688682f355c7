/* The scenarios S1..S5 and H1..H6 (sim.h), with the numbers of a daemon in
 * front of a fast store: FUSE think times of tens of microseconds,
 * sim_device_fast. */
#include "sim.h"

#include <string.h>

#define US 1000ull
#define MS 1000000ull
#define KIB 1024ull

void sim_device_fast(struct sim_device *d, uint32_t slots)
{
	/* 16 slots x 143 us per 4 KiB read = ~112k IOPS; 16 x 312 MB/s = 5 GB/s
	 * for large reads; 200 MB/s per slot for writes; a dsync write or a
	 * flush costs ~250-280 us, i.e. ~3.6k/s at depth 1. */
	*d = (struct sim_device){
		.slots = slots,
		.base_ns = { [SIM_COST_READ] = 130 * US, [SIM_COST_WRITE] = 30 * US,
			     [SIM_COST_DSYNC_WRITE] = 270 * US, [SIM_COST_FLUSH] = 250 * US },
		.ps_per_byte = { [SIM_COST_READ] = 3200, [SIM_COST_WRITE] = 5000,
				 [SIM_COST_DSYNC_WRITE] = 5000, [SIM_COST_FLUSH] = 0 },
		.jitter_pct = 20,
	};
}

void sim_device_cost_model(const struct sim_device *d, struct sched_params *p)
{
	static const enum sim_cost kinds[SCHED_COST_KINDS] = {
		[SCHED_COST_READ] = SIM_COST_READ,
		[SCHED_COST_WRITE] = SIM_COST_WRITE,
		[SCHED_COST_DSYNC] = SIM_COST_DSYNC_WRITE,
	};
	for (int k = 0; k < SCHED_COST_KINDS; k++) {
		uint64_t ps = d->ps_per_byte[kinds[k]];
		if (!ps) {	/* no bandwidth to give: no model for the kind */
			p->model_iops[k] = 0;
			p->model_bytes_per_s[k] = 0;
			continue;
		}
		uint64_t ns_4k = d->base_ns[kinds[k]] + 4096 * ps / 1000;
		p->model_iops[k] = (uint32_t)(d->slots * 1000000000ull / ns_4k);
		p->model_bytes_per_s[k] = d->slots * 1000000000000ull / ps;
	}
}

static void scenario_base(struct sim_scenario *sc, const char *name, const char *about,
			  uint32_t slots, uint64_t duration_ns)
{
	memset(sc, 0, sizeof(*sc));
	sc->name = name;
	sc->about = about;
	sim_device_fast(&sc->dev, slots);
	sc->max_inflight = slots > 1 ? slots : 16;	/* the store's parallelism */
	sc->duration_ns = duration_ns;
	sc->warmup_ns = duration_ns / 10;
	sc->seed = 0x5eed0001;
}

static void tenant_add(struct sim_scenario *sc, struct sim_tenant t)
{
	sc->t[sc->ntenants++] = t;
}

void sim_scenario_s1_journal(struct sim_scenario *sc, uint32_t reader_weight)
{
	scenario_base(sc, reader_weight > 100 ? "S1 journal, heavy reader" : "S1 journal",
		      reader_weight > 100
			      ? "512 B dsync writer waits on a journal tenant; depth-1 reader w400"
			      : "512 B dsync writer waits on a journal tenant; depth-1 reader",
		      16, 1000 * MS);
	tenant_add(sc, (struct sim_tenant){ .name = "dsync-writer", .weight = 100, .depth = 1,
					    .think_ns = 20 * US, .op = SCHED_OP_WRITE, .bytes = 512,
					    .sync = true, .dsync = true, .journal = 1 });
	tenant_add(sc, (struct sim_tenant){ .name = "journal", .weight = 100, .depth = 0,
					    .think_ns = 10 * US, .op = SCHED_OP_WRITE,
					    .bytes = 4 * KIB, .sync = true, .dsync = true,
					    .journal = -1 });
	tenant_add(sc, (struct sim_tenant){ .name = "reader", .weight = reader_weight, .depth = 1,
					    .think_ns = 20 * US, .op = SCHED_OP_READ,
					    .bytes = 4 * KIB, .sync = true, .journal = -1 });
}

void sim_scenario_s2_rate_limited(struct sim_scenario *sc, bool limited_present)
{
	scenario_base(sc, "S2 rate-limited", "two depth-1 4 KiB random writers, one limited to 4 MB/s",
		      16, 1000 * MS);
	tenant_add(sc, (struct sim_tenant){ .name = "free", .weight = 100, .depth = 1,
					    .think_ns = 20 * US, .op = SCHED_OP_WRITE,
					    .bytes = 4 * KIB, .sync = true, .journal = -1 });
	if (limited_present)
		tenant_add(sc, (struct sim_tenant){ .name = "limited-4MB/s", .weight = 100,
						    .depth = 1, .think_ns = 20 * US,
						    .op = SCHED_OP_WRITE, .bytes = 4 * KIB,
						    .sync = true, .rate_bytes_per_s = 4000000,
						    .journal = -1 });
}

void sim_scenario_s3_streaming(struct sim_scenario *sc, bool readers_present)
{
	scenario_base(sc, "S3 streaming", "128 KiB writer at depth 128 + 20 small sync readers",
		      16, 1000 * MS);
	tenant_add(sc, (struct sim_tenant){ .name = "writer", .weight = 100, .depth = 128,
					    .think_ns = 10 * US, .op = SCHED_OP_WRITE,
					    .bytes = 128 * KIB, .journal = -1 });
	for (int i = 0; readers_present && i < 20; i++)
		tenant_add(sc, (struct sim_tenant){ .name = "reader", .weight = 100, .depth = 1,
						    .think_ns = 2 * MS, .op = SCHED_OP_READ,
						    .bytes = 4 * KIB, .sync = true, .journal = -1 });
}

void sim_scenario_s4_weights(struct sim_scenario *sc, uint32_t ntenants)
{
	static const uint32_t w2[] = { 800, 100 }, w3[] = { 500, 300, 100 };
	static const char *const n2[] = { "w800", "w100" }, *const n3[] = { "w500", "w300", "w100" };
	scenario_base(sc, ntenants == 2 ? "S4 weights 8:1" : "S4 weights 5:3:1",
		      "saturating 4 KiB random readers, 8 jobs x depth 32 each", 16, 1000 * MS);
	for (uint32_t i = 0; i < ntenants && i < 3; i++)
		tenant_add(sc, (struct sim_tenant){ .name = ntenants == 2 ? n2[i] : n3[i],
						    .weight = ntenants == 2 ? w2[i] : w3[i],
						    .depth = 256, .think_ns = 10 * US,
						    .op = SCHED_OP_READ, .bytes = 4 * KIB,
						    .sync = true, .journal = -1 });
}

/* S4 as bench/run measures it on a real mount (fio, 4 jobs x iodepth 16 per
 * tenant, through FUSE on a 2-core host): the CPU, not the store, is the
 * bottleneck. The store answers a 4 KiB read in ~100 us, but the reactor
 * waits for a core (0-2 ms), then reaps the whole dispatch depth at once and
 * dispatches the next 32 at one instant (~28k/s, as measured: 25-30k). A
 * caller thread now and then loses its CPU for a few ms, so a tenant's queue
 * in the daemon runs dry although it has 64 requests out; with every one of
 * its requests in a reaped batch, it is empty in the daemon altogether. */
void sim_scenario_s4_fuse(struct sim_scenario *sc, uint32_t ntenants)
{
	static const uint32_t w2[] = { 800, 100 }, w3[] = { 500, 300, 100 };
	static const char *const n2[] = { "w800", "w100" }, *const n3[] = { "w500", "w300", "w100" };
	scenario_base(sc, ntenants == 2 ? "S4 FUSE 8:1" : "S4 FUSE 5:3:1",
		      "4 caller threads x depth 16 per tenant, threads stall 3 ms now and then, "
		      "batched reaping",
		      32, 1000 * MS);
	sc->dev.base_ns[SIM_COST_READ] = 100 * US;
	sc->host.reactor_wake_ns = 1000 * US;
	sc->max_inflight = 32;
	for (uint32_t i = 0; i < ntenants && i < 3; i++)
		tenant_add(sc, (struct sim_tenant){ .name = ntenants == 2 ? n2[i] : n3[i],
						    .weight = ntenants == 2 ? w2[i] : w3[i],
						    .depth = 64, .think_ns = 30 * US,
						    .op = SCHED_OP_READ, .bytes = 4 * KIB,
						    .sync = true, .threads = 4, .stall_ns = 3 * MS,
						    .stall_permille = 30, .journal = -1 });
}

void sim_scenario_s5_sync_reader(struct sim_scenario *sc, uint32_t slots, bool deep_present)
{
	scenario_base(sc, slots == 1 ? "S5 serial store" : "S5 parallel store",
		      "depth-1 sync reader w800 vs deep reader w100", slots,
		      slots == 1 ? 4000 * MS : 1000 * MS);
	tenant_add(sc, (struct sim_tenant){ .name = "depth1-w800", .weight = 800, .depth = 1,
					    .think_ns = 20 * US, .op = SCHED_OP_READ,
					    .bytes = 4 * KIB, .sync = true, .journal = -1 });
	if (deep_present)
		tenant_add(sc, (struct sim_tenant){ .name = "deep-w100", .weight = 100,
						    .depth = 256, .think_ns = 10 * US,
						    .op = SCHED_OP_READ, .bytes = 4 * KIB,
						    .sync = true, .journal = -1 });
}

/* ---- H1..H6: the tenant tree ---- */

/* Returns the group's number for sim_tenant.group and sim_group.parent. */
static int group_add(struct sim_scenario *sc, const char *name, uint32_t weight, int parent)
{
	sc->g[sc->ngroups++] = (struct sim_group){ .name = name, .weight = weight, .parent = parent };
	return (int)sc->ngroups;
}

/* A container saturating the fast parallel store: 4 KiB random reads, 16
 * jobs (alone it fills all 16 slots), FUSE think time. */
static void container_add(struct sim_scenario *sc, const char *name, uint32_t weight, int group)
{
	tenant_add(sc, (struct sim_tenant){ .name = name, .weight = weight, .depth = 16,
					    .think_ns = 10 * US, .op = SCHED_OP_READ,
					    .bytes = 4 * KIB, .sync = true, .journal = -1,
					    .group = group });
}

/* S4_fuse's loaded host for the same tenants: the reactor reaps and
 * dispatches whole batches, caller threads stall. A container then needs
 * 4 threads x iodepth 16 to be backlogged beyond its share: with 16 it
 * gets at most 16 of every 32-request batch whatever its weight. */
static void fuse_host(struct sim_scenario *sc)
{
	sc->dev = (struct sim_device){ 0 };
	sim_device_fast(&sc->dev, 32);
	sc->dev.base_ns[SIM_COST_READ] = 100 * US;
	sc->host.reactor_wake_ns = 1000 * US;
	sc->max_inflight = 32;
	for (uint32_t i = 0; i < sc->ntenants; i++) {
		struct sim_tenant *t = &sc->t[i];
		t->depth = 64;
		t->think_ns = 30 * US;
		t->threads = 4;
		t->stall_ns = 3 * MS;
		t->stall_permille = 30;
	}
}

void sim_scenario_h1_pods(struct sim_scenario *sc)
{
	scenario_base(sc, "H1 pods 2:1",
		      "pod A w200: 1 container; pod B w100: 3 containers; 4 KiB readers, depth 16",
		      16, 1000 * MS);
	int a = group_add(sc, "podA", 200, 0), b = group_add(sc, "podB", 100, 0);
	container_add(sc, "a", 100, a);
	for (int i = 0; i < 3; i++)
		container_add(sc, "b", 100, b);
}

void sim_scenario_h1_pods_fuse(struct sim_scenario *sc)
{
	sim_scenario_h1_pods(sc);
	sc->name = "H1 FUSE pods 2:1";
	sc->about = "H1 through S4_fuse's loaded host: 4 threads x depth 16 per container";
	fuse_host(sc);
}

void sim_scenario_h2_equal_pods(struct sim_scenario *sc)
{
	scenario_base(sc, "H2 equal pods",
		      "pods w100:w100 with 1 and 2 containers; 4 KiB readers, depth 16", 16,
		      1000 * MS);
	int a = group_add(sc, "podA", 100, 0), b = group_add(sc, "podB", 100, 0);
	container_add(sc, "a", 100, a);
	for (int i = 0; i < 2; i++)
		container_add(sc, "b", 100, b);
}

void sim_scenario_h2_equal_pods_fuse(struct sim_scenario *sc)
{
	sim_scenario_h2_equal_pods(sc);
	sc->name = "H2 FUSE equal pods";
	sc->about = "H2 through S4_fuse's loaded host: 4 threads x depth 16 per container";
	fuse_host(sc);
}

/* The subtree's owner spawns children to get more: with 4 of them at its
 * 1 (each of the default weight) it would take 5/6 of the store if they
 * counted at the root. The root tenant has 32 jobs: it must keep ~14.5 of
 * the 16 slots busy, more than 16 jobs with think time reliably do. */
void sim_scenario_h3_delegated(struct sim_scenario *sc)
{
	scenario_base(sc, "H3 delegated subtree",
		      "root tenant w100 next to a subtree w10 of 1, from 400 ms 5 children", 16,
		      1000 * MS);
	int d = group_add(sc, "subtree", 10, 0);
	container_add(sc, "main", 100, 0);
	sc->t[0].depth = 32;
	container_add(sc, "child", 100, d);
	for (int i = 0; i < 4; i++) {
		container_add(sc, "spawned", 100, d);
		sc->t[sc->ntenants - 1].start_ns = 400 * MS;
	}
	/* each phase without the first 100 ms after its change */
	sc->nwindows = 2;
	sc->w[0] = (struct sim_window){ 100 * MS, 400 * MS };
	sc->w[1] = (struct sim_window){ 500 * MS, 1000 * MS };
}

void sim_scenario_h4_nested(struct sim_scenario *sc)
{
	scenario_base(sc, "H4 nested",
		      "A w300 -> { A1 w100 -> 2 leaves, leaf a2 w100 }, leaf b w100 at the root",
		      16, 1000 * MS);
	int a = group_add(sc, "A", 300, 0);
	int a1 = group_add(sc, "A1", 100, a);
	container_add(sc, "a1-leaf", 100, a1);
	container_add(sc, "a1-leaf", 100, a1);
	container_add(sc, "a2", 100, a);
	container_add(sc, "b", 100, 0);
}

/* S5 with each reader in a pod: the depth-1 reader's weight is its pod's. */
void sim_scenario_h5_sync_reader(struct sim_scenario *sc, uint32_t slots, bool deep_present)
{
	sim_scenario_s5_sync_reader(sc, slots, deep_present);
	sc->name = slots == 1 ? "H5 serial store" : "H5 parallel store";
	sc->about = "S5 in pods: depth-1 reader in pod w800, deep reader in pod w100";
	sc->t[0].name = "depth1";
	sc->t[0].group = group_add(sc, "interactive", 800, 0);
	sc->t[0].weight = 100;
	if (deep_present) {
		sc->t[1].name = "deep";
		sc->t[1].group = group_add(sc, "batch", 100, 0);
	}
}

/* S1's heavy variant with each tenant in a pod of its own: the writer's
 * journal is another pod's tenant, and the reader (pod w400) is idled for. */
void sim_scenario_h5_journal(struct sim_scenario *sc)
{
	sim_scenario_s1_journal(sc, 400);
	sc->name = "H5 journal in pods";
	sc->about = "S1 heavy: dsync writer, its journal, depth-1 reader each in a pod (w100/100/400)";
	static const char *const pods[] = { "app", "journald", "interactive" };
	for (uint32_t k = 0; k < 3; k++) {
		sc->t[k].group = group_add(sc, pods[k], sc->t[k].weight, 0);
		sc->t[k].weight = 100;
	}
}

void sim_scenario_h6_reweight(struct sim_scenario *sc)
{
	scenario_base(sc, "H6 reweight",
		      "pods w100:w100 (1 and 2 containers), pod A to w300 at 500 ms", 16,
		      1000 * MS);
	int a = group_add(sc, "podA", 100, 0), b = group_add(sc, "podB", 100, 0);
	container_add(sc, "a", 100, a);
	for (int i = 0; i < 2; i++)
		container_add(sc, "b", 100, b);
	sc->nreweights = 1;
	sc->rw[0] = (struct sim_reweight){ .at_ns = 500 * MS, .group = a, .weight = 300 };
	sc->nwindows = 2;
	sc->w[0] = (struct sim_window){ 100 * MS, 500 * MS };
	sc->w[1] = (struct sim_window){ 600 * MS, 1000 * MS };
}

void sim_params_bfq(struct sched_params *p)
{
	sched_params_default(p);
}

void sim_params_fifo(struct sched_params *p)
{
	sched_params_default(p);
	p->policy = SCHED_POLICY_FIFO;
}

void sim_params_bfq_noinject(struct sched_params *p)
{
	sched_params_default(p);
	p->inject_enable = false;
}

void sim_params_bfq_noidle(struct sched_params *p)
{
	sched_params_default(p);
	p->idle_enable = false;
}

void sim_params_bfq_nohold(struct sched_params *p)
{
	sched_params_default(p);
	p->hold_depth_pct = 0;
}

void sim_params_bfq_noaway(struct sched_params *p)
{
	sched_params_default(p);
	p->away_window_ns = 0;
}

void sim_params_bfq_fixed_idle(struct sched_params *p)
{
	sched_params_default(p);
	p->idle_fixed_ns = 4 * MS;
	p->inject_enable = false;
}

void sim_params_bfq_learn_depth(struct sched_params *p)
{
	sched_params_default(p);
	p->learn_depth = true;
}

void sim_params_bfq_strict(struct sched_params *p)
{
	sched_params_default(p);
	p->work_conserving = SCHED_DOOR_SHUT;
}

void sim_params_bfq_open_door(struct sched_params *p)
{
	sched_params_default(p);
	p->work_conserving = SCHED_DOOR_OPEN;
}

void sim_scenario_q1_queued_store(struct sim_scenario *sc, uint32_t slots)
{
	scenario_base(sc, "Q1 queued store", "two 16-deep 4k readers, 400:100, 32 dispatch slots",
		      slots, 4000 * MS);
	sc->max_inflight = 32;
	sc->warmup_ns = 1000 * MS; /* the depth is learned in the first second */
	tenant_add(sc, (struct sim_tenant){ .name = "heavy", .weight = 400, .depth = 16,
					    .think_ns = 20 * US, .op = SCHED_OP_READ,
					    .bytes = 4 * KIB, .sync = true, .journal = -1 });
	tenant_add(sc, (struct sim_tenant){ .name = "light", .weight = 100, .depth = 16,
					    .think_ns = 20 * US, .op = SCHED_OP_READ,
					    .bytes = 4 * KIB, .sync = true, .journal = -1 });
}

void sim_scenario_q3_depth_fitting(struct sim_scenario *sc, uint32_t slots)
{
	scenario_base(sc, "Q3 depth-fitting readers",
		      "three 8-deep 4k readers, 300:300:100, 32 dispatch slots", slots, 6000 * MS);
	sc->max_inflight = 32;
	sc->warmup_ns = 1000 * MS;
	const uint32_t weights[] = { 300, 300, 100 };
	for (unsigned i = 0; i < 3; i++)
		tenant_add(sc, (struct sim_tenant){ .name = i < 2 ? "heavy" : "light",
						    .weight = weights[i], .depth = 8,
						    .think_ns = 20 * US, .op = SCHED_OP_READ,
						    .bytes = 4 * KIB, .sync = true, .journal = -1 });
}

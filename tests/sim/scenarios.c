/* The scenarios S1..S5 (sim.h), with the numbers of a daemon in front of a
 * fast store: FUSE think times of tens of microseconds, sim_device_fast. */
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
					    .sync = true, .dsync = true, .sequential = true, .journal = 1 });
	tenant_add(sc, (struct sim_tenant){ .name = "journal", .weight = 100, .depth = 0,
					    .think_ns = 10 * US, .op = SCHED_OP_WRITE,
					    .bytes = 4 * KIB, .sync = true, .dsync = true, .sequential = true,
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
					    .bytes = 128 * KIB, .sequential = true, .journal = -1 });
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

/* The FUSE transport alone, measured: a minimal in-memory FUSE server (one
 * read-only file) speaking the kernel's protocol directly, with requests
 * taken either by read(2)/write(2) on /dev/fuse or through FUSE over
 * io_uring (one ring per CPU queue, entries registered with
 * FUSE_IO_URING_CMD_REGISTER, each answer committed with the next request
 * fetched in one COMMIT_AND_FETCH), or by /dev/fuse read through io_uring
 * ("devring": one thread, a multishot read of the non-blocking device into a
 * ring of provided buffers, answers written as SQEs of the same ring: no
 * thread woken per request, nothing held per request in the kernel). Client
 * threads pread 4 KiB of the file
 * (direct I/O, so every read reaches the server) for a fixed time; the
 * probe prints reads per second and the server threads' CPU per read.
 *
 * No backing store and no scheduler: what is left is the cost of the
 * transport itself, the part issue 25 proposes to replace in the daemon.
 *
 *   fusesched-bench-uringprobe dev|uring|devring MOUNTPOINT [SECONDS] [THREADS]
 *
 * Root only (mount(2), and the fuse module's enable_uring, which it sets
 * for the run and restores). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* FUSE over io_uring, protocol 7.42 (the system's linux/fuse.h predates it). */
#define PROBE_OVER_IO_URING (1ull << 41)
#define PROBE_INIT_EXT (1u << 30)
#define PROBE_URING_CMD_REGISTER 1u
#define PROBE_URING_CMD_COMMIT_AND_FETCH 2u

struct probe_uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;	/* to be echoed in the commit */
	uint32_t payload_sz;	/* bytes valid in the payload, either way */
	uint32_t padding;
	uint64_t reserved;
};

struct probe_uring_req_header {
	char in_out[128];	/* fuse_in_header on fetch, fuse_out_header on commit */
	char op_in[128];	/* the opcode's fixed argument */
	struct probe_uring_ent_in_out ent;
};

struct probe_uring_cmd_req {	/* in the SQE128's command area */
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

#define FILE_INO 2u
#define FILE_SIZE (64u << 20)
#define READ_BYTES 4096u
#define MAX_WRITE (128u << 10)
#define PAYLOAD_BYTES (MAX_WRITE + 4096u)
#define RING_DEPTH 8u
#define ATTR_TIMEOUT_S 3600

static bool use_uring, use_devring;
static int fuse_fd = -1;
static char file_data[MAX_WRITE];
static atomic_bool stopping;
static atomic_ulong dev_requests, ring_requests;	/* answered each way */

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The server's threads, whose CPU clocks are read around the run. */
static pthread_mutex_t servers_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t servers[256];
static unsigned nservers;

static void server_register(void)
{
	pthread_mutex_lock(&servers_lock);
	if (nservers < sizeof(servers) / sizeof(servers[0]))
		servers[nservers++] = pthread_self();
	pthread_mutex_unlock(&servers_lock);
}

static uint64_t servers_cpu_ns(void)
{
	uint64_t sum = 0;
	pthread_mutex_lock(&servers_lock);
	for (unsigned i = 0; i < nservers; i++) {
		clockid_t c;
		if (!pthread_getcpuclockid(servers[i], &c))
			sum += now_ns(c);
	}
	pthread_mutex_unlock(&servers_lock);
	return sum;
}

static void fill_attr(uint64_t ino, struct fuse_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->mode = ino == FUSE_ROOT_ID ? S_IFDIR | 0755 : S_IFREG | 0444;
	a->nlink = ino == FUSE_ROOT_ID ? 2 : 1;
	a->size = ino == FUSE_ROOT_ID ? 0 : FILE_SIZE;
	a->blksize = 4096;
	a->blocks = a->size / 512;
}

/* One request: its header, fixed argument and the rest (a name). Writes the
 * answer's body to out; returns its size, or a negative errno, or 1 << 30
 * for a request that takes no answer. */
#define NO_REPLY (1 << 30)
static int handle(const struct fuse_in_header *in, const void *arg, const char *rest, void *out)
{
	switch (in->opcode) {
	case FUSE_INIT: {
		const struct fuse_init_in *ii = arg;
		struct fuse_init_out *io = out;
		memset(io, 0, sizeof(*io));
		io->major = FUSE_KERNEL_VERSION;
		io->minor = ii->minor;
		io->max_readahead = ii->max_readahead;
		io->max_write = MAX_WRITE;
		io->max_pages = MAX_WRITE / 4096;
		io->max_background = 64;
		io->congestion_threshold = 48;
		io->time_gran = 1;
		uint64_t want = FUSE_ASYNC_READ | FUSE_MAX_PAGES | PROBE_INIT_EXT |
				(use_uring ? PROBE_OVER_IO_URING : 0);
		uint64_t offered = ii->flags | ((uint64_t)ii->flags2 << 32);
		if (use_uring && !(offered & PROBE_OVER_IO_URING)) {
			fprintf(stderr, "uringprobe: the kernel does not offer FUSE over io_uring\n");
			exit(77);
		}
		want &= offered | PROBE_INIT_EXT;
		io->flags = (uint32_t)want;
		io->flags2 = (uint32_t)(want >> 32);
		return sizeof(*io);
	}
	case FUSE_LOOKUP: {
		if (in->nodeid != FUSE_ROOT_ID || strcmp(rest, "f"))
			return -ENOENT;
		struct fuse_entry_out *e = out;
		memset(e, 0, sizeof(*e));
		e->nodeid = FILE_INO;
		e->entry_valid = e->attr_valid = ATTR_TIMEOUT_S;
		fill_attr(FILE_INO, &e->attr);
		return sizeof(*e);
	}
	case FUSE_GETATTR: {
		struct fuse_attr_out *a = out;
		memset(a, 0, sizeof(*a));
		a->attr_valid = ATTR_TIMEOUT_S;
		fill_attr(in->nodeid, &a->attr);
		return sizeof(*a);
	}
	case FUSE_OPEN:
	case FUSE_OPENDIR: {
		struct fuse_open_out *o = out;
		memset(o, 0, sizeof(*o));
		o->open_flags = in->opcode == FUSE_OPEN ? FOPEN_DIRECT_IO : 0;
		return sizeof(*o);
	}
	case FUSE_READ: {
		const struct fuse_read_in *r = arg;
		uint32_t n = r->size > MAX_WRITE ? MAX_WRITE : r->size;
		if (r->offset >= FILE_SIZE)
			return 0;
		memcpy(out, file_data, n);
		return (int)n;
	}
	case FUSE_FLUSH:
	case FUSE_RELEASE:
	case FUSE_RELEASEDIR:
	case FUSE_DESTROY:
		return 0;
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT:
		return NO_REPLY;
	default:
		return -ENOSYS;
	}
}

/* The /dev/fuse answer's header for handle()'s result r, written at the
 * start of out (the body follows it); returns the answer's length. */
static uint32_t answer_header(char *out, uint64_t unique, int r)
{
	struct fuse_out_header *oh = (void *)out;
	oh->unique = unique;
	oh->error = r < 0 ? r : 0;
	oh->len = (uint32_t)(sizeof(*oh) + (r > 0 ? (size_t)r : 0));
	return oh->len;
}

static void *uring_queue(void *arg);

/* /dev/fuse: INIT always comes this way, and with io_uring so do forgets
 * and interrupts (and everything until every queue has entries). */
static void *dev_loop(void *unused)
{
	(void)unused;
	static __thread char buf[PAYLOAD_BYTES + 4096];
	static __thread char out[sizeof(struct fuse_out_header) + MAX_WRITE];
	server_register();
	for (;;) {
		ssize_t n = read(fuse_fd, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN || errno == ENOENT)
				continue;
			break;	/* ENODEV: unmounted */
		}
		atomic_fetch_add(&dev_requests, 1);
		const struct fuse_in_header *in = (const void *)buf;
		const char *arg = buf + sizeof(*in);
		const char *rest = arg;
		if (in->opcode == FUSE_INIT)
			rest = arg + sizeof(struct fuse_init_in);
		int r = handle(in, arg, rest, out + sizeof(struct fuse_out_header));
		if (r == NO_REPLY)
			continue;
		if (write(fuse_fd, out, answer_header(out, in->unique, r)) < 0 && errno != ENOENT)
			perror("uringprobe: write /dev/fuse");
		if (in->opcode == FUSE_INIT && use_uring) {
			long ncpu = sysconf(_SC_NPROCESSORS_CONF);
			for (long q = 0; q < ncpu; q++) {
				pthread_t t;
				pthread_create(&t, NULL, uring_queue, (void *)q);
				pthread_detach(t);
			}
		}
	}
	return NULL;
}

struct ring_ent {
	struct probe_uring_req_header hdr;
	struct iovec iov[2];
	char payload[PAYLOAD_BYTES];
};

static void submit_cmd(struct io_uring *ring, struct ring_ent *e, uint32_t cmd, uint16_t qid)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	if (!sqe) {	/* one SQE per entry and the ring holds twice as many */
		fprintf(stderr, "uringprobe: submission queue full\n");
		exit(1);
	}
	memset((char *)sqe, 0, 128);	/* SQE128: the command area runs past the struct */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fuse_fd;
	sqe->cmd_op = cmd;
	io_uring_sqe_set_data(sqe, e);
	if (cmd == PROBE_URING_CMD_REGISTER) {
		sqe->addr = (uint64_t)(uintptr_t)e->iov;
		sqe->len = 2;
	}
	struct probe_uring_cmd_req *req = (void *)sqe->cmd;
	req->qid = qid;
	req->commit_id = cmd == PROBE_URING_CMD_COMMIT_AND_FETCH ? e->hdr.ent.commit_id : 0;
}

/* One CPU queue: its entries fetch requests; each answer goes back with the
 * fetch of the next in one submission. */
static void *uring_queue(void *arg)
{
	uint16_t qid = (uint16_t)(uintptr_t)arg;
	struct io_uring ring;
	struct io_uring_params p = { .flags = IORING_SETUP_SQE128 };
	int rc = io_uring_queue_init_params(RING_DEPTH * 2, &ring, &p);
	if (rc < 0) {
		fprintf(stderr, "uringprobe: queue %u: io_uring_queue_init: %s\n", qid, strerror(-rc));
		exit(1);
	}
	struct ring_ent *ents = calloc(RING_DEPTH, sizeof(*ents));
	for (unsigned i = 0; i < RING_DEPTH; i++) {
		ents[i].iov[0] = (struct iovec){ &ents[i].hdr, sizeof(ents[i].hdr) };
		ents[i].iov[1] = (struct iovec){ ents[i].payload, sizeof(ents[i].payload) };
		submit_cmd(&ring, &ents[i], PROBE_URING_CMD_REGISTER, qid);
	}
	io_uring_submit(&ring);
	server_register();
	while (!atomic_load(&stopping)) {
		struct io_uring_cqe *cqe;
		rc = io_uring_submit_and_wait(&ring, 1);
		if (rc < 0 && rc != -EINTR)
			break;
		unsigned head, seen = 0;
		bool dead = false;
		io_uring_for_each_cqe(&ring, head, cqe) {
			seen++;
			struct ring_ent *e = io_uring_cqe_get_data(cqe);
			if (cqe->res < 0) {
				if (cqe->res != -ENOTCONN && cqe->res != -ECANCELED)
					fprintf(stderr, "uringprobe: queue %u: %s\n", qid,
						strerror(-cqe->res));
				dead = true;
				continue;
			}
			atomic_fetch_add(&ring_requests, 1);
			const struct fuse_in_header *in = (const void *)e->hdr.in_out;
			e->payload[e->hdr.ent.payload_sz < PAYLOAD_BYTES ? e->hdr.ent.payload_sz
									: PAYLOAD_BYTES - 1] = 0;
			static __thread char out[MAX_WRITE];
			int r = handle(in, e->hdr.op_in, e->payload, out);
			struct fuse_out_header *oh = (void *)e->hdr.in_out;
			uint64_t unique = in->unique;
			memset(oh, 0, sizeof(*oh));
			oh->unique = unique;
			oh->error = r < 0 ? r : 0;
			uint32_t sz = r > 0 && r != NO_REPLY ? (uint32_t)r : 0;
			memcpy(e->payload, out, sz);
			e->hdr.ent.payload_sz = sz;
			submit_cmd(&ring, e, PROBE_URING_CMD_COMMIT_AND_FETCH, qid);
		}
		io_uring_cq_advance(&ring, seen);
		if (dead)
			break;
	}
	return NULL;
}


/* /dev/fuse through io_uring: IORING_OP_READ_MULTISHOT (kernel 6.7; not in
 * this liburing) reads each request into a provided buffer whenever the
 * device polls readable; the answers go back as writes in the same ring. */
#define PROBE_OP_READ_MULTISHOT 49
#define DEVRING_BUFS 64u
#define DEVRING_BUF_BYTES (PAYLOAD_BYTES + 4096u)
#define DEVRING_GROUP 7
#define DEVRING_READ_TAG UINT64_MAX

static void devring_arm(struct io_uring *ring)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	io_uring_prep_rw(PROBE_OP_READ_MULTISHOT, sqe, fuse_fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = DEVRING_GROUP;
	io_uring_sqe_set_data64(sqe, DEVRING_READ_TAG);
}

static void *devring_loop(void *unused)
{
	(void)unused;
	struct io_uring ring;
	int rc = io_uring_queue_init(256, &ring, 0);
	if (rc < 0) {
		fprintf(stderr, "uringprobe: io_uring_queue_init: %s\n", strerror(-rc));
		exit(1);
	}
	size_t br_bytes = DEVRING_BUFS * sizeof(struct io_uring_buf);
	struct io_uring_buf_ring *br = aligned_alloc(4096, (br_bytes + 4095) / 4096 * 4096);
	char *bufs = aligned_alloc(4096, (size_t)DEVRING_BUFS * DEVRING_BUF_BYTES);
	char *outs = malloc((size_t)DEVRING_BUFS * (sizeof(struct fuse_out_header) + MAX_WRITE));
	if (!br || !bufs || !outs) {
		fprintf(stderr, "uringprobe: out of memory\n");
		exit(1);
	}
	struct io_uring_buf_reg reg = { .ring_addr = (uint64_t)(uintptr_t)br,
					.ring_entries = DEVRING_BUFS, .bgid = DEVRING_GROUP };
	rc = io_uring_register_buf_ring(&ring, &reg, 0);
	if (rc < 0) {
		fprintf(stderr, "uringprobe: io_uring_register_buf_ring: %s\n", strerror(-rc));
		exit(1);
	}
	io_uring_buf_ring_init(br);
	unsigned mask = io_uring_buf_ring_mask(DEVRING_BUFS);
	for (unsigned i = 0; i < DEVRING_BUFS; i++)
		io_uring_buf_ring_add(br, bufs + (size_t)i * DEVRING_BUF_BYTES, DEVRING_BUF_BYTES,
				      (unsigned short)i, mask, (int)i);
	io_uring_buf_ring_advance(br, DEVRING_BUFS);
	devring_arm(&ring);
	server_register();
	for (;;) {
		rc = io_uring_submit_and_wait(&ring, 1);
		if (rc < 0 && rc != -EINTR)
			break;
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0, returned = 0;
		bool dead = false;
		io_uring_for_each_cqe(&ring, head, cqe) {
			seen++;
			uint64_t tag = io_uring_cqe_get_data64(cqe);
			if (tag != DEVRING_READ_TAG) {	/* an answer written: its buffer back */
				unsigned bid = (unsigned)tag;
				io_uring_buf_ring_add(br, bufs + (size_t)bid * DEVRING_BUF_BYTES,
						      DEVRING_BUF_BYTES, (unsigned short)bid, mask,
						      (int)returned++);
				continue;
			}
			if (!(cqe->flags & IORING_CQE_F_MORE) && !dead)
				devring_arm(&ring);	/* rearmed (out of buffers, or stopped) */
			if (cqe->res < 0) {
				if (cqe->res == -ENODEV || cqe->res == -ENOTCONN)
					dead = true;
				else if (cqe->res != -ENOBUFS && cqe->res != -EAGAIN &&
					 cqe->res != -EINTR && cqe->res != -ENOENT)
					fprintf(stderr, "uringprobe: devring read: %s\n",
						strerror(-cqe->res));
				continue;
			}
			unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
			const char *buf = bufs + (size_t)bid * DEVRING_BUF_BYTES;
			atomic_fetch_add(&dev_requests, 1);
			const struct fuse_in_header *in = (const void *)buf;
			const char *arg = buf + sizeof(*in);
			const char *rest = in->opcode == FUSE_INIT ? arg + sizeof(struct fuse_init_in)
								   : arg;
			char *out = outs + (size_t)bid * (sizeof(struct fuse_out_header) + MAX_WRITE);
			int r = handle(in, arg, rest, out + sizeof(struct fuse_out_header));
			if (r == NO_REPLY) {
				io_uring_buf_ring_add(br, (void *)buf, DEVRING_BUF_BYTES,
						      (unsigned short)bid, mask, (int)returned++);
				continue;
			}
			uint32_t len = answer_header(out, in->unique, r);
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			if (!sqe) {
				io_uring_submit(&ring);
				sqe = io_uring_get_sqe(&ring);
			}
			io_uring_prep_write(sqe, fuse_fd, out, len, 0);
			io_uring_sqe_set_data64(sqe, bid);
		}
		io_uring_cq_advance(&ring, seen);
		if (returned)
			io_uring_buf_ring_advance(br, (int)returned);
		if (dead || atomic_load(&stopping))
			break;
	}
	io_uring_queue_exit(&ring);
	return NULL;
}

struct client {
	const char *path;
	double seconds;
	unsigned long reads;
	unsigned seed;
};

static void *client_loop(void *arg)
{
	struct client *c = arg;
	int fd = open(c->path, O_RDONLY);
	if (fd < 0) {
		perror("uringprobe: open");
		exit(1);
	}
	char buf[READ_BYTES];
	uint64_t end = now_ns(CLOCK_MONOTONIC) + (uint64_t)(c->seconds * 1e9);
	while (now_ns(CLOCK_MONOTONIC) < end) {
		for (int i = 0; i < 64; i++) {
			off_t off = (off_t)(rand_r(&c->seed) % (FILE_SIZE / READ_BYTES)) * READ_BYTES;
			if (pread(fd, buf, sizeof(buf), off) != (ssize_t)sizeof(buf)) {
				perror("uringprobe: pread");
				exit(1);
			}
			c->reads++;
		}
	}
	close(fd);
	return NULL;
}

static const char *uring_param = "/sys/module/fuse/parameters/enable_uring";

static int set_enable_uring(char v)
{
	int fd = open(uring_param, O_WRONLY);
	if (fd < 0)
		return -errno;
	int rc = write(fd, &v, 1) == 1 ? 0 : -errno;
	close(fd);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 3 || (strcmp(argv[1], "dev") && strcmp(argv[1], "uring") &&
			 strcmp(argv[1], "devring"))) {
		fprintf(stderr, "usage: %s dev|uring|devring MOUNTPOINT [SECONDS] [THREADS]\n",
			argv[0]);
		return 2;
	}
	use_uring = !strcmp(argv[1], "uring");
	use_devring = !strcmp(argv[1], "devring");
	const char *mnt = argv[2];
	double seconds = argc > 3 ? atof(argv[3]) : 5;
	unsigned nthreads = argc > 4 ? (unsigned)atoi(argv[4]) : 1;
	if (nthreads < 1 || nthreads > 256 || seconds <= 0) {
		fprintf(stderr, "uringprobe: SECONDS > 0, THREADS 1..256\n");
		return 2;
	}
	char old = 'N';
	if (use_uring) {
		FILE *f = fopen(uring_param, "r");
		if (!f || fscanf(f, " %c", &old) != 1) {
			fprintf(stderr, "uringprobe: %s: this kernel has no FUSE over io_uring\n",
				uring_param);
			return 77;
		}
		fclose(f);
		if (set_enable_uring('Y') < 0) {
			fprintf(stderr, "uringprobe: cannot set %s (root only)\n", uring_param);
			return 77;
		}
	}
	memset(file_data, 'x', sizeof(file_data));
	fuse_fd = open("/dev/fuse", O_RDWR | O_CLOEXEC | (use_devring ? O_NONBLOCK : 0));
	if (fuse_fd < 0) {
		perror("uringprobe: /dev/fuse");
		return 77;
	}
	char opts[128];
	snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other",
		 fuse_fd);
	if (mount("uringprobe", mnt, "fuse.uringprobe", MS_NOSUID | MS_NODEV, opts) < 0) {
		perror("uringprobe: mount");
		return 1;
	}
	/* As many /dev/fuse readers as CPUs, as there are ring queues. */
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	pthread_t dev[64];
	long ndev = use_devring ? 1 : ncpu < 1 ? 1 : ncpu > 64 ? 64 : ncpu;
	for (long i = 0; i < ndev; i++)
		pthread_create(&dev[i], NULL, use_devring ? devring_loop : dev_loop, NULL);
	char path[4096];
	snprintf(path, sizeof(path), "%s/f", mnt);
	/* The first lookup waits for INIT; with io_uring, give the queues a
	 * moment to register so the measured reads take the ring. */
	struct stat st;
	if (stat(path, &st) < 0) {
		perror("uringprobe: stat");
		return 1;
	}
	usleep(200000);
	struct client *c = calloc(nthreads, sizeof(*c));
	pthread_t *t = calloc(nthreads, sizeof(*t));
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	uint64_t cpu_before = servers_cpu_ns();
	for (unsigned i = 0; i < nthreads; i++) {
		c[i] = (struct client){ path, seconds, 0, i + 1 };
		pthread_create(&t[i], NULL, client_loop, &c[i]);
	}
	unsigned long reads = 0;
	for (unsigned i = 0; i < nthreads; i++) {
		pthread_join(t[i], NULL);
		reads += c[i].reads;
	}
	double secs = (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
	uint64_t cpu = servers_cpu_ns() - cpu_before;
	atomic_store(&stopping, true);
	umount2(mnt, MNT_DETACH);
	close(fuse_fd);
	for (long i = 0; i < ndev; i++)
		pthread_join(dev[i], NULL);
	if (use_uring)
		set_enable_uring(old);
	printf("transport %s threads %u: %.0f reads/s, server CPU %.2f us/read (%lu reads, %.1f s;"
	       " requests by /dev/fuse %lu, by io_uring %lu)\n",
	       argv[1], nthreads, (double)reads / secs, reads ? (double)cpu / 1e3 / (double)reads : 0,
	       reads, secs, atomic_load(&dev_requests), atomic_load(&ring_requests));
	return 0;
}

/* NBD exports through libnbd (see bdev.h).
 *
 * A round (design.md §3) is one write() and one barrier().  write() sends
 * each run of consecutive blocks as one NBD_CMD_WRITE and keeps up to
 * WINDOW requests in flight, so the round's writes cross the network
 * together rather than one round trip each.  barrier() is NBD_CMD_FLUSH.
 * The protocol's flush covers only writes whose replies came back before
 * it was sent, so write() waits for every reply before it returns.  A
 * write() that needs one request sends it with FUA, which makes it durable
 * by itself: the barrier after it sends nothing, one round trip instead of
 * two (the last rounds of an fsync are often one block).
 *
 * Connection loss.  Requests in flight fail.  Writes already acknowledged
 * since the last flush may have been only in the server's cache, so they
 * count as lost: once a new connection is made, the write() or barrier()
 * that noticed returns -ECONNRESET and the engine writes the whole round
 * again; nothing is marked committed before a flush on the connection
 * that carried every write of the round has returned.  The device
 * reconnects with backoff (50 ms doubling to 1 s) for up to retry_ms after
 * the loss; then it gives up with -EIO and each later call makes one
 * attempt.  Reads are simply sent again.
 *
 * One mutex serialises every use of the handle: a read waits while a
 * round's writes or flush are in flight.
 */
#include <errno.h>
#include <libnbd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bdev_int.h"

#define WINDOW	       64	  /* requests in flight at most */
#define MAX_REQUEST    (2u << 20) /* bytes per request at most */
#define MAX_RESETS     16	  /* -ECONNRESET without a flush between: give up */
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000

struct bdev_nbd {
	struct bdev_base base;
	pthread_mutex_t lock;
	struct nbd_handle *h; /* NULL while disconnected */
	char *uri;
	unsigned flags;
	unsigned retry_ms;
	bool can_flush, can_fua;
	uint32_t max_request;	/* bytes */
	uint64_t gen;		/* connections made so far */
	bool unflushed;		/* writes acknowledged since the last flush */
	uint64_t unflushed_gen; /* the connection that carried them */
	uint64_t down_since_ms; /* when the connection was lost; 0: it is up */
	unsigned resets;	/* -ECONNRESET since the last good flush */
	uint8_t *stage;		/* runs copied together for one request */
	size_t stage_cap;
	struct bdev_stats st;
};

struct io {
	uint64_t off;
	void *buf;
	uint32_t len;
	bool write;
	bool fua;
};

/* Requests of one call: counts down as replies arrive. */
struct batch {
	size_t left;
	int err;
};

static const char *const schemes[] = {"nbd://",	      "nbds://",      "nbd+unix://",
				      "nbds+unix://", "nbd+vsock://", "nbds+vsock://"};

bool bdev_nbd_is_uri(const char *spec)
{
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
		if (strncmp(spec, schemes[i], strlen(schemes[i])) == 0)
			return true;
	return false;
}

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static uint64_t now_ms(void)
{
	return bdev_now_ns() / 1000000u;
}

/* libnbd's errno for the last failure, never 0. */
static int nbd_errno(void)
{
	int e = nbd_get_errno();

	return e > 0 ? e : EIO;
}

/* libnbd's message without the "nbd_connect_uri: " it starts with. */
static const char *nbd_message(void)
{
	const char *m = nbd_get_error();
	const char *c;

	if (!m)
		return "unknown error";
	c = strstr(m, ": ");
	return c && strncmp(m, "nbd_", 4) == 0 ? c + 2 : m;
}

/* A new connection, checked against what the device needs; *bytes is the
 * export's size. */
static int dial(const char *uri, unsigned flags, struct nbd_handle **out, uint64_t *bytes,
		char *err, size_t errlen)
{
	struct nbd_handle *h = nbd_create();
	int64_t size;
	int r;

	if (!h) {
		seterr(err, errlen, "cannot start libnbd: %s", nbd_message());
		return -nbd_errno();
	}
	/* The URI is the user's own: a TLS key file it names may be read. */
	nbd_set_uri_allow_local_file(h, true);
	if (nbd_connect_uri(h, uri) < 0) {
		r = -nbd_errno();
		/* (those two mean something else below: a server that wants
		 * TLS first answers EOPNOTSUPP) */
		if (r == -EROFS || r == -EOPNOTSUPP)
			r = -EPROTO;
		seterr(err, errlen, "%s", nbd_message());
		goto fail;
	}
	size = nbd_get_size(h);
	if (size < 0) {
		r = -nbd_errno();
		seterr(err, errlen, "cannot get the export's size: %s", nbd_message());
		goto fail;
	}
	if (!(flags & BDEV_RDONLY) && nbd_is_read_only(h) != 0) {
		seterr(err, errlen, "the export is read-only");
		r = -EROFS;
		goto fail;
	}
	if (!(flags & (BDEV_RDONLY | BDEV_UNSAFE_NO_FLUSH)) && nbd_can_flush(h) != 1) {
		/* NBD cannot say whether such a server caches writes; if it
		 * does, nothing orders them and a crash leaves any mix. */
		seterr(err, errlen,
		       "the export cannot flush its write cache, so no write order survives a "
		       "crash of the server");
		r = -EOPNOTSUPP;
		goto fail;
	}
	*out = h;
	*bytes = (uint64_t)size;
	return 0;
fail:
	nbd_close(h);
	return r;
}

static int req_done(void *user_data, int *error)
{
	struct batch *b = user_data;

	b->left--;
	if (*error && !b->err)
		b->err = *error;
	return 1; /* retire the command */
}

static void hang_up(struct bdev_nbd *d)
{
	if (!d->h)
		return;
	nbd_close(d->h);
	d->h = NULL;
	if (!d->down_since_ms)
		d->down_since_ms = now_ms();
}

/* Make sure there is a connection: after a loss, keep trying with backoff
 * until retry_ms have passed since it; after that, one attempt. */
static int ensure(struct bdev_nbd *d)
{
	unsigned backoff = BACKOFF_MIN_MS;
	struct nbd_handle *h;
	uint64_t bytes;
	int r;

	if (d->h)
		return 0;
	if (!d->down_since_ms)
		d->down_since_ms = now_ms();
	for (;;) {
		r = dial(d->uri, d->flags, &h, &bytes, NULL, 0);
		if (r == 0 && bytes != d->base.bytes) {
			/* another disk behind the same name */
			nbd_close(h);
			r = -EIO;
		}
		if (r == 0) {
			d->h = h;
			d->gen++;
			__atomic_fetch_add(&d->st.reconnects, 1, __ATOMIC_RELAXED);
			d->down_since_ms = 0;
			return 0;
		}
		if (now_ms() + backoff > d->down_since_ms + d->retry_ms)
			return -EIO;
		struct timespec ts = {backoff / 1000, (long)(backoff % 1000) * 1000000L};
		nanosleep(&ts, NULL);
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
}

/* Send ios[0..n) with up to WINDOW in flight and wait for every reply.
 * Returns 0, the server's -errno, or -ENOTCONN when the connection was
 * lost (the handle is then closed). */
static int run(struct bdev_nbd *d, const struct io *ios, size_t n)
{
	struct batch b = {.left = 0, .err = 0};
	size_t next = 0;
	int r = 0;

	while (next < n || b.left) {
		while (next < n && b.left < WINDOW && !b.err) {
			const struct io *io = &ios[next];
			nbd_completion_callback cb = {.callback = req_done, .user_data = &b};
			int64_t c;

			c = io->write ? nbd_aio_pwrite(d->h, io->buf, io->len, io->off, cb,
						       io->fua ? LIBNBD_CMD_FLAG_FUA : 0)
				      : nbd_aio_pread(d->h, io->buf, io->len, io->off, cb, 0);
			if (c < 0) {
				r = -nbd_errno();
				goto failed;
			}
			b.left++;
			next++;
		}
		if (b.err && !b.left)
			break;
		if (b.left && nbd_poll(d->h, -1) < 0) {
			r = -nbd_errno();
			goto failed;
		}
		if (!b.left && b.err)
			break;
	}
	return b.err ? -b.err : 0;
failed:
	/* A dead connection, or a request libnbd refused outright. */
	if (nbd_aio_is_dead(d->h) || nbd_aio_is_closed(d->h) || r == -ENOTCONN) {
		hang_up(d); /* completes what is left with an error */
		return -ENOTCONN;
	}
	/* let what was sent finish before b goes away */
	while (b.left && nbd_poll(d->h, -1) >= 0)
		;
	if (b.left) {
		hang_up(d);
		return -ENOTCONN;
	}
	return r;
}

static int nbd_read(struct bdev *dev, uint64_t blkno, uint32_t count, void *buf)
{
	struct bdev_nbd *d = (struct bdev_nbd *)dev;
	size_t len = (size_t)count * dev->block_size, nio, i;
	uint64_t off = blkno * dev->block_size;
	struct io *ios;
	int r;

	if (blkno > dev->nblocks || count > dev->nblocks - blkno)
		return -EINVAL;
	if (count == 0)
		return 0;
	nio = (len + d->max_request - 1) / d->max_request;
	ios = calloc(nio, sizeof(*ios));
	if (!ios)
		return -ENOMEM;
	for (i = 0; i < nio; i++) {
		size_t at = i * d->max_request;

		ios[i].off = off + at;
		ios[i].buf = (uint8_t *)buf + at;
		ios[i].len = (uint32_t)(len - at < d->max_request ? len - at : d->max_request);
	}
	pthread_mutex_lock(&d->lock);
	for (;;) {
		r = ensure(d);
		if (r)
			break;
		r = run(d, ios, nio);
		if (r != -ENOTCONN)
			break;
	}
	pthread_mutex_unlock(&d->lock);
	free(ios);
	return r;
}

/* After the connection carrying unflushed writes was lost and a new one
 * made: the caller must write the round again (bdev.h). */
static int lost_writes(struct bdev_nbd *d)
{
	d->unflushed = false;
	if (++d->resets > MAX_RESETS)
		return -EIO;
	return -ECONNRESET;
}

/* Build the requests of a write: runs of consecutive blocks, at most
 * max_request bytes each, copied into d->stage when longer than a block. */
static int plan_writes(struct bdev_nbd *d, const struct bdev_write *w, size_t n, struct io **out,
		       size_t *nout)
{
	const struct bdev_write **order = NULL;
	uint32_t bs = d->base.dev.block_size;
	uint32_t per = d->max_request / bs ? d->max_request / bs : 1;
	size_t i, nio = 0, staged = 0;
	struct io *ios = NULL;
	int r = 0;

	order = malloc(n * sizeof(*order));
	ios = calloc(n, sizeof(*ios));
	if (!order || !ios) {
		r = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (w[i].blkno >= d->base.dev.nblocks) {
			r = -EINVAL;
			goto out;
		}
		order[i] = &w[i];
	}
	bdev_sort_writes(order, n);
	if (d->stage_cap < n * bs) {
		uint8_t *s = realloc(d->stage, n * bs);

		if (!s) {
			r = -ENOMEM;
			goto out;
		}
		d->stage = s;
		d->stage_cap = n * bs;
	}
	for (i = 0; i < n;) {
		uint64_t start = order[i]->blkno;
		size_t k = 1;

		while (i + k < n && k < per && order[i + k]->blkno == start + k)
			k++;
		ios[nio].off = start * bs;
		ios[nio].len = (uint32_t)(k * bs);
		ios[nio].write = true;
		if (k == 1) {
			ios[nio].buf = (void *)order[i]->data;
		} else {
			ios[nio].buf = d->stage + staged;
			for (size_t j = 0; j < k; j++)
				memcpy(d->stage + staged + j * bs, order[i + j]->data, bs);
			staged += k * bs;
		}
		nio++;
		i += k;
	}
	*out = ios;
	*nout = nio;
	ios = NULL;
out:
	free(ios);
	free(order);
	return r;
}

static int nbd_write(struct bdev *dev, const struct bdev_write *w, size_t n)
{
	struct bdev_nbd *d = (struct bdev_nbd *)dev;
	struct io *ios = NULL;
	size_t nio = 0;
	bool fua;
	int r;

	if (d->flags & BDEV_RDONLY)
		return -EROFS;
	if (n == 0)
		return 0;
	pthread_mutex_lock(&d->lock);
	r = plan_writes(d, w, n, &ios, &nio);
	if (r)
		goto out;
	r = ensure(d);
	if (r)
		goto out;
	if (d->unflushed && d->unflushed_gen != d->gen) {
		r = lost_writes(d);
		goto out;
	}
	/* One request with FUA is durable when its reply comes: if nothing
	 * else is unflushed, the barrier after it has nothing to do. */
	fua = nio == 1 && d->can_fua && !d->unflushed;
	ios[0].fua = fua;
	r = run(d, ios, nio);
	if (r == -ENOTCONN) {
		/* this round's writes, and any before it since the last
		 * flush, may be lost */
		r = ensure(d);
		if (r == 0)
			r = lost_writes(d);
		goto out;
	}
	if (r) {
		/* a refused write may still have landed in the cache */
		if (!d->unflushed)
			d->unflushed_gen = d->gen;
		d->unflushed = true;
		goto out;
	}
	if (fua) {
		__atomic_fetch_add(&d->st.fua_barriers, 1, __ATOMIC_RELAXED);
	} else {
		if (!d->unflushed)
			d->unflushed_gen = d->gen;
		d->unflushed = true;
	}
out:
	pthread_mutex_unlock(&d->lock);
	free(ios);
	return r;
}

static int nbd_barrier(struct bdev *dev)
{
	struct bdev_nbd *d = (struct bdev_nbd *)dev;
	struct batch b = {.left = 0, .err = 0};
	uint64_t t0;
	int r = 0;

	if (d->flags & BDEV_RDONLY)
		return 0;
	pthread_mutex_lock(&d->lock);
	if (!d->unflushed) {
		/* nothing written since the last flush, or a FUA write */
		d->resets = 0;
		d->down_since_ms = 0;
		goto out;
	}
	if (!d->h || d->unflushed_gen != d->gen) {
		r = ensure(d);
		if (r == 0)
			r = lost_writes(d);
		goto out;
	}
	if (!d->can_flush) {
		/* -o unsafe_no_flush: every write has been answered */
		d->unflushed = false;
		goto out;
	}
	t0 = bdev_now_ns();
	if (nbd_aio_flush(d->h, (nbd_completion_callback){.callback = req_done, .user_data = &b},
			  0) < 0) {
		r = -nbd_errno();
	} else {
		b.left = 1;
		while (b.left && nbd_poll(d->h, -1) >= 0)
			;
		r = b.left ? -ENOTCONN : -b.err;
	}
	if (b.left || nbd_aio_is_dead(d->h) || nbd_aio_is_closed(d->h)) {
		hang_up(d);
		r = ensure(d);
		if (r == 0)
			r = lost_writes(d);
		goto out;
	}
	if (r == 0) {
		bdev_count_flush(&d->st, bdev_now_ns() - t0);
		d->unflushed = false;
		d->resets = 0;
		d->down_since_ms = 0;
	}
out:
	pthread_mutex_unlock(&d->lock);
	return r;
}

static void nbd_stats(struct bdev *dev, struct bdev_stats *st)
{
	struct bdev_nbd *d = (struct bdev_nbd *)dev;

	/* not under d->lock, which a flush may hold for long */
	bdev_load_stats(st, &d->st);
	strcpy(st->kind, "nbd");
}

static void nbd_destroy(struct bdev *dev)
{
	struct bdev_nbd *d = (struct bdev_nbd *)dev;

	if (d->h) {
		/* a clean NBD_CMD_DISC; the caller flushed what it wanted */
		nbd_shutdown(d->h, 0);
		nbd_close(d->h);
	}
	pthread_mutex_destroy(&d->lock);
	free(d->stage);
	free(d->uri);
	free(d);
}

static const struct bdev_ops nbd_ops = {
    .read = nbd_read,
    .write = nbd_write,
    .barrier = nbd_barrier,
    .destroy = nbd_destroy,
    .stats = nbd_stats,
};

int bdev_nbd_open(const char *uri, uint32_t block_size, unsigned flags, unsigned retry_ms,
		  struct bdev **out, char *err, size_t errlen)
{
	struct bdev_nbd *d;
	struct nbd_handle *h;
	uint64_t bytes;
	int64_t max;
	int r;

	r = bdev_check_block_size(block_size);
	if (r) {
		seterr(err, errlen, "bad block size %u", block_size);
		return r;
	}
	r = dial(uri, flags, &h, &bytes, err, errlen);
	if (r)
		return r;
	if (bytes < block_size) {
		seterr(err, errlen, "the export holds %llu bytes, less than one block",
		       (unsigned long long)bytes);
		nbd_close(h);
		return -ENOSPC;
	}
	d = calloc(1, sizeof(*d));
	if (!d || !(d->uri = strdup(uri))) {
		free(d);
		nbd_close(h);
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&d->lock, NULL);
	d->h = h;
	d->flags = flags;
	d->retry_ms = retry_ms;
	d->gen = 1;
	d->can_flush = nbd_can_flush(h) == 1;
	d->can_fua = nbd_can_fua(h) == 1;
	d->max_request = MAX_REQUEST;
	max = nbd_get_block_size(h, LIBNBD_SIZE_MAXIMUM);
	/* (a whole number of the largest ext2 blocks when it can be) */
	if (max > 0 && (uint64_t)max < d->max_request)
		d->max_request = (uint32_t)max >= 65536 ? (uint32_t)max & ~0xffffu : (uint32_t)max;
	d->base.dev.ops = &nbd_ops;
	d->base.dev.block_size = block_size;
	d->base.dev.nblocks = bytes / block_size;
	d->base.bytes = bytes;
	*out = &d->base.dev;
	return 0;
}

/* The recorder: a pass-through device that keeps a log of every successful
 * write (with a copy of the data) and barrier, so crash tests can rebuild
 * any disk state a crash could have left (see crashsim.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "bdev_int.h"
#include "util/grow.h"

struct bdev_rec {
	struct bdev_base base;
	struct bdev *inner;
	pthread_mutex_t lock;
	uint8_t *initial;
	struct rec_event *ev;
	size_t nev, cap;
};

static int rec_read(struct bdev *d, uint64_t blkno, uint32_t count, void *buf)
{
	return bdev_read(((struct bdev_rec *)d)->inner, blkno, count, buf);
}

static int rec_append(struct bdev_rec *r, enum rec_kind kind, uint64_t blkno, const void *data)
{
	struct rec_event *e;

	if (GROW(&r->ev, &r->cap, r->nev + 1, 64))
		return -ENOMEM;
	e = &r->ev[r->nev++];
	e->kind = kind;
	e->blkno = blkno;
	e->data = data;
	return 0;
}

static int rec_write(struct bdev *d, const struct bdev_write *w, size_t n)
{
	struct bdev_rec *r = (struct bdev_rec *)d;
	uint32_t bs = d->block_size;
	void **copies;
	size_t i;
	int err;

	/* Copy first, so that a write the log cannot hold is refused before
	 * it reaches the device (a log missing a write would be wrong). */
	copies = calloc(n ? n : 1, sizeof(*copies));
	if (!copies)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		copies[i] = malloc(bs);
		if (!copies[i]) {
			err = -ENOMEM;
			goto fail;
		}
		memcpy(copies[i], w[i].data, bs);
	}
	pthread_mutex_lock(&r->lock);
	err = bdev_write(r->inner, w, n);
	if (err) {
		pthread_mutex_unlock(&r->lock);
		goto fail;
	}
	for (i = 0; i < n; i++) {
		err = rec_append(r, REC_WRITE, w[i].blkno, copies[i]);
		if (err) {
			/* The device has the data but the log cannot record
			 * it: drop the whole log's tail is not possible, so
			 * report the error (tests treat it as fatal). */
			pthread_mutex_unlock(&r->lock);
			goto fail_from;
		}
	}
	pthread_mutex_unlock(&r->lock);
	free(copies);
	return 0;
fail_from:
	/* copies[0..i) belong to the log now */
	for (; i < n; i++)
		free(copies[i]);
	free(copies);
	return err;
fail:
	for (i = 0; i < n; i++)
		free(copies[i]);
	free(copies);
	return err;
}

static int rec_barrier(struct bdev *d)
{
	struct bdev_rec *r = (struct bdev_rec *)d;
	int err;

	pthread_mutex_lock(&r->lock);
	err = bdev_barrier(r->inner);
	if (!err)
		err = rec_append(r, REC_BARRIER, 0, NULL);
	pthread_mutex_unlock(&r->lock);
	return err;
}

static void rec_stats(struct bdev *d, struct bdev_stats *st)
{
	bdev_get_stats(((struct bdev_rec *)d)->inner, st);
}

static void rec_clear(struct bdev_rec *r)
{
	size_t i;

	for (i = 0; i < r->nev; i++)
		free((void *)r->ev[i].data);
	r->nev = 0;
}

static void rec_destroy(struct bdev *d)
{
	struct bdev_rec *r = (struct bdev_rec *)d;

	rec_clear(r);
	free(r->ev);
	free(r->initial);
	bdev_destroy(r->inner);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/* The log holds whole blocks of one size, so the size may change only
 * while the log is empty; the inner device follows. */
static int rec_resize(struct bdev *d, uint32_t old_bs)
{
	struct bdev_rec *r = (struct bdev_rec *)d;
	int err;

	if (r->nev)
		return -EBUSY;
	err = bdev_set_block_size(r->inner, d->block_size);
	if (err)
		return err;
	d->nblocks = r->inner->nblocks;
	return 0;
}

static const struct bdev_ops rec_ops = {
    .read = rec_read,
    .write = rec_write,
    .barrier = rec_barrier,
    .destroy = rec_destroy,
    .stats = rec_stats,
};

/* Read the whole inner device into a fresh buffer. */
static int snapshot(struct bdev *inner, uint8_t **out)
{
	size_t len = (size_t)inner->nblocks * inner->block_size;
	uint8_t *buf = malloc(len ? len : 1);
	int err;

	if (!buf)
		return -ENOMEM;
	err = bdev_read(inner, 0, (uint32_t)inner->nblocks, buf);
	if (err) {
		free(buf);
		return err;
	}
	*out = buf;
	return 0;
}

int bdev_recorder_create(struct bdev *inner, struct bdev **out)
{
	struct bdev_rec *r;
	int err;

	if (inner->nblocks > UINT32_MAX)
		return -EFBIG;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	err = snapshot(inner, &r->initial);
	if (err) {
		free(r);
		return err;
	}
	pthread_mutex_init(&r->lock, NULL);
	r->inner = inner;
	r->base.dev.ops = &rec_ops;
	r->base.dev.block_size = inner->block_size;
	r->base.dev.nblocks = inner->nblocks;
	r->base.bytes = inner->nblocks * inner->block_size;
	r->base.resize = rec_resize;
	*out = &r->base.dev;
	return 0;
}

size_t bdev_recorder_count(struct bdev *rec)
{
	struct bdev_rec *r = (struct bdev_rec *)rec;
	size_t n;

	pthread_mutex_lock(&r->lock);
	n = r->nev;
	pthread_mutex_unlock(&r->lock);
	return n;
}

const struct rec_event *bdev_recorder_event(struct bdev *rec, size_t i)
{
	struct bdev_rec *r = (struct bdev_rec *)rec;
	const struct rec_event *e = NULL;

	pthread_mutex_lock(&r->lock);
	if (i < r->nev)
		e = &r->ev[i];
	pthread_mutex_unlock(&r->lock);
	return e;
}

const void *bdev_recorder_initial(struct bdev *rec)
{
	return ((struct bdev_rec *)rec)->initial;
}

int bdev_recorder_reset(struct bdev *rec)
{
	struct bdev_rec *r = (struct bdev_rec *)rec;
	uint8_t *img;
	int err;

	pthread_mutex_lock(&r->lock);
	err = snapshot(r->inner, &img);
	if (!err) {
		rec_clear(r);
		free(r->initial);
		r->initial = img;
	}
	pthread_mutex_unlock(&r->lock);
	return err;
}

/* Recorder logs saved to and loaded from files; see reclog.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bdev_int.h"
#include "reclog.h"

#define MAGIC "FSTREC1\n"

int reclog_save(struct bdev *rec, const char *path)
{
	size_t n = bdev_recorder_count(rec), i;
	uint32_t bs = rec->block_size;
	uint64_t nb = rec->nblocks;
	FILE *f = fopen(path, "we");
	int r = 0;

	if (!f)
		return -errno;
	if (fwrite(MAGIC, 8, 1, f) != 1 || fwrite(&bs, sizeof(bs), 1, f) != 1 ||
	    fwrite(&nb, sizeof(nb), 1, f) != 1 ||
	    fwrite(bdev_recorder_initial(rec), bs, nb, f) != nb)
		r = -EIO;
	for (i = 0; r == 0 && i < n; i++) {
		const struct rec_event *ev = bdev_recorder_event(rec, i);
		uint8_t kind = ev->kind == REC_WRITE ? 0 : 1;

		if (fwrite(&kind, 1, 1, f) != 1)
			r = -EIO;
		else if (kind == 0 && (fwrite(&ev->blkno, sizeof(ev->blkno), 1, f) != 1 ||
				       fwrite(ev->data, bs, 1, f) != 1))
			r = -EIO;
	}
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	return r;
}

int reclog_load(const char *path, struct bdev **out)
{
	struct bdev *mem = NULL, *rec = NULL;
	struct bdev_write w;
	char magic[8];
	uint8_t *img = NULL, *blk = NULL, kind;
	uint32_t bs;
	uint64_t nb, blkno;
	FILE *f = fopen(path, "re");
	int r;

	if (!f)
		return -errno;
	r = -EPROTO;
	if (fread(magic, 8, 1, f) != 1 || memcmp(magic, MAGIC, 8) ||
	    fread(&bs, sizeof(bs), 1, f) != 1 || fread(&nb, sizeof(nb), 1, f) != 1 ||
	    bdev_check_block_size(bs) || nb == 0 || nb > (1ULL << 32) / bs)
		goto out;
	img = malloc((size_t)bs * nb);
	blk = malloc(bs);
	if (!img || !blk) {
		r = -ENOMEM;
		goto out;
	}
	if (fread(img, bs, nb, f) != nb)
		goto out;
	r = bdev_mem_create(bs, 0, img, (size_t)bs * nb, &mem);
	if (r < 0)
		goto out;
	r = bdev_recorder_create(mem, &rec);
	if (r < 0) {
		bdev_destroy(mem);
		goto out;
	}
	while (fread(&kind, 1, 1, f) == 1) {
		if (kind == 1) {
			r = bdev_barrier(rec);
		} else if (kind == 0 && fread(&blkno, sizeof(blkno), 1, f) == 1 &&
			   fread(blk, bs, 1, f) == 1 && blkno < nb) {
			w.blkno = blkno;
			w.data = blk;
			r = bdev_write(rec, &w, 1);
		} else {
			r = -EPROTO;
		}
		if (r < 0)
			goto out;
	}
	*out = rec;
	rec = NULL;
	r = 0;
out:
	bdev_destroy(rec);
	free(img);
	free(blk);
	fclose(f);
	return r;
}

/* A pass-through device that saves its recorder's log when destroyed. */
struct saver {
	struct bdev_base base;
	struct bdev *rec;
	char *path;
};

static int sv_read(struct bdev *d, uint64_t blkno, uint32_t count, void *buf)
{
	return bdev_read(((struct saver *)d)->rec, blkno, count, buf);
}

static int sv_write(struct bdev *d, const struct bdev_write *w, size_t n)
{
	return bdev_write(((struct saver *)d)->rec, w, n);
}

static int sv_barrier(struct bdev *d)
{
	return bdev_barrier(((struct saver *)d)->rec);
}

static void sv_stats(struct bdev *d, struct bdev_stats *st)
{
	bdev_get_stats(((struct saver *)d)->rec, st);
}

static void sv_destroy(struct bdev *d)
{
	struct saver *s = (struct saver *)d;

	/* Nothing to tell the caller: a test notices a missing log. */
	reclog_save(s->rec, s->path);
	bdev_destroy(s->rec);
	free(s->path);
	free(s);
}

static int sv_resize(struct bdev *d, uint32_t old_bs)
{
	struct saver *s = (struct saver *)d;
	int r = bdev_set_block_size(s->rec, d->block_size);

	if (r == 0)
		d->nblocks = s->rec->nblocks;
	return r;
}

static const struct bdev_ops sv_ops = {
    .read = sv_read,
    .write = sv_write,
    .barrier = sv_barrier,
    .destroy = sv_destroy,
    .stats = sv_stats,
};

int reclog_saver_create(struct bdev *rec, const char *logpath, struct bdev **out)
{
	struct saver *s;

	s = calloc(1, sizeof(*s));
	if (!s || !(s->path = strdup(logpath))) {
		free(s);
		return -ENOMEM;
	}
	s->base.dev.ops = &sv_ops;
	s->base.dev.block_size = rec->block_size;
	s->base.dev.nblocks = rec->nblocks;
	s->base.bytes = (uint64_t)rec->nblocks * rec->block_size;
	s->base.resize = sv_resize;
	s->rec = rec;
	*out = &s->base.dev;
	return 0;
}

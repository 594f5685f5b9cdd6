/* Fuzz target "control": the control protocol's decoder and the daemon's
 * handlers (ctl_dispatch, pgsrv.c, the group engine behind them), fed as
 * the socket would feed them, by several clients, with file-system changes
 * made in between by those clients' scopes.
 *
 * Input: a sequence of records.  The first byte c of a record says who
 * and what:
 *   c & 3         peer pid: this process, its parent, pid 1, or a pid that
 *                 does not exist
 *   (c >> 2) & 3  peer uid: 0, 1000, 1001, 65534
 *   c & 0x80      a file-system change by this process (its scope applies):
 *                 (c >> 4) & 7 picks which, the next byte the file
 *   else c & 0x40 a short request: op, a, b in the next three bytes (a and
 *                 b signed), magic and version filled in
 *   else          a raw message: a length byte, then that many bytes
 * Each test input gets a fresh file system and server, so runs do not
 * depend on each other.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bdev/bdev.h"
#include "ext2/e2.h"
#include "mkfs/mkfs.h"
#include "pg/pgsrv.h"
#include "proto/ctl.h"
#include "fuzz.h"

#define IMG_BYTES (128u << 10)
#define MAX_RECORDS 256

static uint8_t *g_img;
static size_t g_len;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct mkfs_opts o;
	struct mkfs_info info;
	char path[] = "/tmp/fuzz-control-XXXXXX", err[256];
	FILE *f;
	int fd;

	(void)argc;
	(void)argv;
	fd = mkstemp(path);
	if (fd < 0)
		abort();
	close(fd);
	mkfs_opts_init(&o);
	o.size = IMG_BYTES;
	o.block_size = 1024;
	o.flags = MKFS_FORCE;
	if (mkfs_make(path, &o, &info, err, sizeof(err)) < 0) {
		fprintf(stderr, "fuzz_control: mkfs: %s\n", err);
		abort();
	}
	g_img = malloc(IMG_BYTES);
	f = fopen(path, "rb");
	if (!g_img || !f || fread(g_img, 1, IMG_BYTES, f) != IMG_BYTES)
		abort();
	fclose(f);
	unlink(path);
	g_len = IMG_BYTES;
	return 0;
}

static void fs_change(struct e2fs *fs, struct pgsrv *srv, unsigned what, unsigned which)
{
	char name[8];
	struct stat st;
	uint8_t buf[3000];
	uint32_t ino = 0;
	struct pg_op op;
	struct e2_caller who = {0};

	snprintf(name, sizeof(name), "f%u", which & 3);
	memset(buf, (int)which, sizeof(buf));
	who.group_order = pgsrv_enter(srv, getpid(), &op);
	who.scope = pgsrv_scope(&op);
	if (e2_lookup(fs, E2_ROOT_INO, name, &st) == 0) {
		ino = (uint32_t)st.st_ino;
		e2_forget(fs, ino, 1);
	}
	switch (what) {
	case 0:
	case 1:
		if (!ino &&
		    e2_mknod(fs, &who, E2_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &st) == 0) {
			ino = (uint32_t)st.st_ino;
			e2_forget(fs, ino, 1);
		}
		if (ino)
			e2_write(fs, &who, ino, buf, sizeof(buf), (off_t)(which >> 2) * 1000);
		break;
	case 2:
		e2_unlink(fs, &who, E2_ROOT_INO, name);
		break;
	case 3:
		e2_rename(fs, &who, E2_ROOT_INO, name, E2_ROOT_INO, "f0", 0);
		break;
	case 4:
		if (ino)
			e2_fsync(fs, ino, which & 1);
		break;
	case 5:
		/* An fsync that the scope may turn into an ordering point. */
		if (!pgsrv_fsync_order(srv, getpid()) && ino)
			e2_fsync(fs, ino, false);
		break;
	case 6:
		e2_sync(fs);
		break;
	default: {
		size_t nw;

		cache_flush_round(e2_cache(fs), &nw);
		break;
	}
	}
	pgsrv_leave(srv, &op);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uid_t uids[] = { 0, 1000, 1001, 65534 };
	struct e2_opts o = {
		.consistency = CONSISTENCY_SOFTUPDATES,
		.cache_blocks = 256,
		.no_flusher = true,
	};
	struct ctl_peer peer;
	struct ctl_req req;
	struct ctl_rep rep;
	struct bdev *dev;
	struct e2fs *fs;
	struct pgsrv *srv;
	size_t i = 0, len;
	unsigned n = 0;
	uint8_t c;

	if (bdev_mem_create(1024, 0, g_img, g_len, &dev) < 0)
		return 0;
	if (e2_open_bdev(dev, &o, &fs) < 0)
		abort();
	if (pgsrv_create(fs, "/", "", NULL, &srv) < 0)
		abort();
	while (i < size && n++ < MAX_RECORDS) {
		c = data[i++];
		switch (c & 3) {
		case 0: peer.pid = getpid(); break;
		case 1: peer.pid = getppid(); break;
		case 2: peer.pid = 1; break;
		default: peer.pid = 0x3ffffff0; break;
		}
		peer.uid = uids[(c >> 2) & 3];
		peer.gid = peer.uid;
		if (c & 0x80) {
			if (i >= size)
				break;
			fs_change(fs, srv, (c >> 4) & 7, data[i++]);
		} else if (c & 0x40) {
			if (size - i < 3)
				break;
			memset(&req, 0, sizeof(req));
			req.magic = CTL_MAGIC;
			req.version = CTL_VERSION;
			req.op = data[i];
			req.a = (int8_t)data[i + 1];
			req.b = (int8_t)data[i + 2];
			/* CTL_STATS: a view and block in a, b; a small limit. */
			req.flags = (c & 0x30) << 4;
			i += 3;
			pgsrv_request(srv, &peer, &req, sizeof(req), &rep);
		} else {
			if (i >= size)
				break;
			len = data[i++];
			if (len > size - i)
				len = size - i;
			pgsrv_request(srv, &peer, data + i, len, &rep);
			i += len;
		}
	}
	pgsrv_destroy(srv);
	e2_close(fs);
	return 0;
}

/* fsops: the small-file workloads of the file-system benchmark
 * (tests/bench/fs_bench.sh), done in one process so that what is timed is
 * the file system and not the cost of starting a program per operation.
 *
 *   fsops create DIR N           create N empty files in DIR
 *   fsops stat DIR N             stat them (by name: a directory lookup each)
 *   fsops unlink DIR N           unlink them
 *   fsops replace DIR N [-s] [-k K] [-b BYTES] [-i FIRST]
 *                                N atomic replacements (write a temporary
 *                                file, fsync it when -s, rename it over one
 *                                of K files); update number i goes to file
 *                                i mod K, numbering from FIRST (default 0)
 *   fsops mail-setup DIR N       an mbox "inbox" of 2N messages, an empty
 *                                "archive"
 *   fsops mail-move DIR N [-s|-p]
 *                                move N messages from inbox to archive
 *                                (append, then mark the original deleted),
 *                                then expunge the inbox; -s fsyncs after
 *                                every step as a mail server does; -p
 *                                orders the same steps with patchgroups
 *                                instead (the C API, no fsync, and the
 *                                order policy PG_ORDER_GROUPS)
 *
 * Exit status: 0 done, 1 a file-system call failed, 64 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fstitch/patchgroup.h"

#define EX_USAGE_ 64

static const char *prog = "fsops";

static int fail(const char *what, const char *name)
{
	fprintf(stderr, "%s: %s '%s': %s\n", prog, what, name, strerror(errno));
	return 1;
}

static void fname(char *buf, size_t len, const char *dir, const char *pfx,
		  unsigned long i)
{
	snprintf(buf, len, "%s/%s%07lu", dir, pfx, i);
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int do_create(const char *dir, unsigned long n)
{
	char p[4096];

	for (unsigned long i = 0; i < n; i++) {
		int fd;

		fname(p, sizeof(p), dir, "f", i);
		fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd < 0)
			return fail("cannot create", p);
		close(fd);
	}
	return 0;
}

static int do_stat(const char *dir, unsigned long n)
{
	char p[4096];
	struct stat st;

	/* Walk the names in a scrambled order, so that a file system whose
	 * lookup is a linear scan pays for it instead of hitting the entry
	 * after the previous one.  The multiplier is prime, so it is coprime
	 * with any n used here and the walk visits every name once. */
	for (unsigned long i = 0; i < n; i++) {
		unsigned long j = (i * 2654435761UL) % n;

		fname(p, sizeof(p), dir, "f", j);
		if (stat(p, &st) < 0)
			return fail("cannot stat", p);
	}
	return 0;
}

static int do_unlink(const char *dir, unsigned long n)
{
	char p[4096];

	for (unsigned long i = 0; i < n; i++) {
		fname(p, sizeof(p), dir, "f", i);
		if (unlink(p) < 0)
			return fail("cannot unlink", p);
	}
	return 0;
}

static int do_replace(const char *dir, unsigned long first, unsigned long n,
		      bool sync, unsigned long k, size_t bytes)
{
	char tmp[4096], dst[4096];
	char *buf;
	int ret = 1;

	buf = malloc(bytes);
	if (!buf) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return 1;
	}
	for (unsigned long i = first; i < first + n; i++) {
		unsigned long f = i % k;
		int fd, h;

		/* The content names its version, so a reader can tell which
		 * update a file holds after a crash. */
		memset(buf, 'a' + (int)(i % 26), bytes);
		h = snprintf(buf, bytes, "version %lu of file %lu\n", i, f);
		buf[h] = '\n';
		buf[bytes - 1] = '\n';
		fname(tmp, sizeof(tmp), dir, ".tmp", f);
		fname(dst, sizeof(dst), dir, "r", f);
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0) {
			fail("cannot create", tmp);
			goto out;
		}
		if (write_all(fd, buf, bytes) < 0) {
			fail("cannot write", tmp);
			close(fd);
			goto out;
		}
		if (sync && fsync(fd) < 0) {
			fail("cannot fsync", tmp);
			close(fd);
			goto out;
		}
		if (close(fd) < 0) {
			fail("cannot close", tmp);
			goto out;
		}
		if (rename(tmp, dst) < 0) {
			fail("cannot rename", tmp);
			goto out;
		}
	}
	ret = 0;
out:
	free(buf);
	return ret;
}

/* Message i of the inbox: a deterministic size between 1 and 8 KiB so that
 * every contender sees the same bytes. */
static size_t msg_size(unsigned long i)
{
	uint32_t x = (uint32_t)i * 2654435761u;

	x ^= x >> 13;
	return 1024 + x % (7 * 1024);
}

static int do_mail_setup(const char *dir, unsigned long n)
{
	char p[4096];
	char *buf;
	FILE *f;
	int ret = 1;

	buf = malloc(8 * 1024 + 1);
	if (!buf) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return 1;
	}
	snprintf(p, sizeof(p), "%s/inbox", dir);
	f = fopen(p, "w");
	if (!f) {
		fail("cannot create", p);
		goto out;
	}
	for (unsigned long i = 0; i < 2 * n; i++) {
		size_t body = msg_size(i);

		memset(buf, 'm', body);
		for (size_t j = 71; j < body; j += 72)
			buf[j] = '\n';
		buf[body - 1] = '\n';
		/* "Status: O" is a fixed-width field: a move overwrites its
		 * letter in place, as mbox servers mark deleted messages. */
		fprintf(f, "From bench@example.org Thu Dec  3 09:00:00 2026\n"
			   "Status: O\nSubject: message %lu\n\n", i);
		fwrite(buf, 1, body, f);
		fputc('\n', f);
	}
	if (fclose(f) != 0) {
		fail("cannot write", p);
		goto out;
	}
	snprintf(p, sizeof(p), "%s/archive", dir);
	f = fopen(p, "w");
	if (!f || fclose(f) != 0) {
		fail("cannot create", p);
		goto out;
	}
	ret = 0;
out:
	free(buf);
	return ret;
}

struct msg {
	size_t off, len, status;
};

static char *slurp(const char *p, size_t *len)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd;

	fd = open(p, O_RDONLY);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0)
		goto fail;
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		goto fail;
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);

		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			if (r == 0)
				errno = EIO;
			free(buf);
			goto fail;
		}
		got += (size_t)r;
	}
	close(fd);
	buf[got] = '\0';
	*len = got;
	return buf;
fail:
	close(fd);
	return NULL;
}

/* Split an mbox into messages: each starts with "From " at a line start. */
static struct msg *parse_mbox(const char *buf, size_t len, size_t *count)
{
	struct msg *m = NULL;
	size_t n = 0, cap = 0;

	for (size_t i = 0; i < len;) {
		const char *next, *st;
		size_t end;

		if (strncmp(buf + i, "From ", 5) != 0) {
			free(m);
			errno = EINVAL;
			return NULL;
		}
		next = strstr(buf + i + 1, "\nFrom ");
		end = next ? (size_t)(next - buf) + 1 : len;
		st = strstr(buf + i, "\nStatus: ");
		if (n == cap) {
			struct msg *nm;

			cap = cap ? 2 * cap : 256;
			nm = realloc(m, cap * sizeof(*m));
			if (!nm) {
				free(m);
				return NULL;
			}
			m = nm;
		}
		m[n].off = i;
		m[n].len = end - i;
		m[n].status = st && (size_t)(st - buf) < end ?
			(size_t)(st - buf) + 9 : 0;
		n++;
		i = end;
	}
	*count = n;
	return m;
}

/* With pg, the fsyncs' order comes from patchgroups, as a mail server
 * written for them would keep it (the article's IMAP server): each
 * message's copy in a group of its own, its mark in a group after that
 * one, so that no message is marked deleted before its copy is on disk;
 * the expunge's new inbox in a group, and its rename in a group after
 * that one and after every mark.  Messages do not wait for one another,
 * which the fsync version, one step at a time, cannot say, and with the
 * order policy PG_ORDER_GROUPS no append waits for the marks before it
 * either (rename_order=all would make it). */
static int do_mail_move(const char *dir, unsigned long n, bool sync, bool pg)
{
	char in[4096], ar[4096], tmp[4096];
	struct msg *m = NULL;
	size_t len, count, moved = 0;
	char *buf;
	int fin = -1, far = -1, ft = -1, fd = -1, ret = 1;
	pg_t ex = 0, a = 0, mk = 0, t = 0;

	snprintf(in, sizeof(in), "%s/inbox", dir);
	snprintf(ar, sizeof(ar), "%s/archive", dir);
	snprintf(tmp, sizeof(tmp), "%s/.inbox.tmp", dir);
	buf = slurp(in, &len);
	if (!buf)
		return fail("cannot read", in);
	m = parse_mbox(buf, len, &count);
	if (!m) {
		fail("cannot parse", in);
		goto out;
	}
	fin = open(in, O_WRONLY);
	if (fin < 0) {
		fail("cannot open", in);
		goto out;
	}
	far = open(ar, O_WRONLY | O_APPEND);
	if (far < 0) {
		fail("cannot open", ar);
		goto out;
	}
	if (pg) {
		pg_set_control(dir);
		if (pg_order_policy(PG_ORDER_GROUPS) < 0) {
			fail("cannot set the order policy on", dir);
			goto out;
		}
		ex = pg_create();
		if (ex < 0) {
			fail("cannot create a patchgroup on", dir);
			goto out;
		}
	}
	/* Move every other message: the expunge then has real copying to do. */
	for (size_t i = 0; i < count && moved < n; i += 2) {
		if (!m[i].status) {
			errno = EINVAL;
			fail("message without status in", in);
			goto out;
		}
		if (pg && (a = pg_switch(0, 0, PG_SWITCH_ENGAGE)) < 0) {
			fail("cannot start the copy's patchgroup on", dir);
			goto out;
		}
		if (write_all(far, buf + m[i].off, m[i].len) < 0) {
			fail("cannot append to", ar);
			goto out;
		}
		if (pg && (pg_disengage(a) < 0 || (mk = pg_switch(0, a, PG_SWITCH_ENGAGE)) < 0)) {
			fail("cannot start the mark's patchgroup on", dir);
			goto out;
		}
		/* The copy must be durable before the original is marked
		 * deleted, or a crash loses the message. */
		if (sync && fsync(far) < 0) {
			fail("cannot fsync", ar);
			goto out;
		}
		if (pwrite(fin, "D", 1, (off_t)m[i].status) != 1) {
			fail("cannot mark message in", in);
			goto out;
		}
		if (sync && fsync(fin) < 0) {
			fail("cannot fsync", in);
			goto out;
		}
		if (pg && (pg_disengage(mk) < 0 || pg_depend(mk, ex) < 0 || pg_close(a) < 0 ||
			   pg_close(mk) < 0)) {
			fail("cannot order the expunge after the mark on", dir);
			goto out;
		}
		buf[m[i].status] = 'D';
		moved++;
	}
	if (moved < n) {
		fprintf(stderr, "%s: '%s' holds only %zu messages to move\n",
			prog, in, moved);
		goto out;
	}
	/* Expunge: the new inbox replaces the old one atomically. */
	if (pg && (t = pg_switch(0, 0, PG_SWITCH_ENGAGE)) < 0) {
		fail("cannot start the new inbox's patchgroup on", dir);
		goto out;
	}
	ft = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (ft < 0) {
		fail("cannot create", tmp);
		goto out;
	}
	for (size_t i = 0; i < count; i++) {
		if (m[i].status && buf[m[i].status] == 'D')
			continue;
		if (write_all(ft, buf + m[i].off, m[i].len) < 0) {
			fail("cannot write", tmp);
			goto out;
		}
	}
	if (sync && fsync(ft) < 0) {
		fail("cannot fsync", tmp);
		goto out;
	}
	if (pg && (pg_disengage(t) < 0 || pg_depend(t, ex) < 0 || pg_engage(ex) < 0)) {
		fail("cannot order the expunge on", dir);
		goto out;
	}
	if (rename(tmp, in) < 0) {
		fail("cannot rename", tmp);
		goto out;
	}
	if (pg && (pg_disengage(ex) < 0 || pg_close(t) < 0 || pg_close(ex) < 0)) {
		fail("cannot close the expunge's patchgroups on", dir);
		goto out;
	}
	if (sync) {
		fd = open(dir, O_RDONLY | O_DIRECTORY);
		if (fd < 0 || fsync(fd) < 0) {
			fail("cannot fsync", dir);
			goto out;
		}
	}
	ret = 0;
out:
	if (fd >= 0)
		close(fd);
	if (ft >= 0)
		close(ft);
	if (far >= 0)
		close(far);
	if (fin >= 0)
		close(fin);
	free(m);
	free(buf);
	return ret;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: %s create|stat|unlink|mail-setup DIR N\n"
		"       %s replace DIR N [-s] [-k FILES] [-b BYTES] [-i FIRST]\n"
		"       %s mail-move DIR N [-s|-p]\n", prog, prog, prog);
	return EX_USAGE_;
}

static bool parse_num(const char *s, unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v == 0)
		return false;
	*out = v;
	return true;
}

int main(int argc, char **argv)
{
	unsigned long n, k = 16, bytes = 1024, first = 0;
	const char *cmd, *dir;
	bool sync = false, pg = false;

	if (argc < 4)
		return usage();
	cmd = argv[1];
	dir = argv[2];
	if (!parse_num(argv[3], &n)) {
		fprintf(stderr, "%s: bad count '%s'\n", prog, argv[3]);
		return EX_USAGE_;
	}
	for (int i = 4; i < argc; i++) {
		if (strcmp(argv[i], "-s") == 0) {
			sync = true;
		} else if (strcmp(argv[i], "-p") == 0) {
			pg = true;
		} else if (strcmp(argv[i], "-k") == 0 && i + 1 < argc) {
			if (!parse_num(argv[++i], &k))
				return usage();
		} else if (strcmp(argv[i], "-i") == 0 && i + 1 < argc) {
			char *end;

			errno = 0;
			first = strtoul(argv[++i], &end, 10);
			if (errno || *end || end == argv[i])
				return usage();
		} else if (strcmp(argv[i], "-b") == 0 && i + 1 < argc) {
			if (!parse_num(argv[++i], &bytes) || bytes < 64)
				return usage();
		} else {
			return usage();
		}
	}
	if (strcmp(cmd, "create") == 0)
		return do_create(dir, n);
	if (strcmp(cmd, "stat") == 0)
		return do_stat(dir, n);
	if (strcmp(cmd, "unlink") == 0)
		return do_unlink(dir, n);
	if (strcmp(cmd, "replace") == 0)
		return do_replace(dir, first, n, sync, k, bytes);
	if (strcmp(cmd, "mail-setup") == 0)
		return do_mail_setup(dir, n);
	if (sync && pg)
		return usage();
	if (pg && strcmp(cmd, "mail-move") != 0)
		return usage();
	if (strcmp(cmd, "mail-move") == 0)
		return do_mail_move(dir, n, sync, pg);
	return usage();
}

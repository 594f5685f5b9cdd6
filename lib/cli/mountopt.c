/* Parsing and validating fstitch-mount's -o options (see mountopt.h). */
#include "mountopt.h"
#include "util/size.h"

#include <ctype.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Options that go to the kernel through libfuse unchanged.  Anything not
 * listed here, not ours and not mount(8)'s is refused, so that a typo is an
 * error at mount time rather than a libfuse message or a silent no-op. */
static const char *const fuse_flags[] = {
    "allow_other", "allow_root",  "auto_unmount",  "rw",       "suid",	     "nosuid",
    "dev",	   "nodev",	  "exec",	   "noexec",   "async",	     "sync",
    "dirsync",	   "atime",	  "noatime",	   "diratime", "nodiratime", "relatime",
    "norelatime",  "strictatime", "nostrictatime", "lazytime", "nolazytime",
};
/* Of those, the ones libfuse does not know: the daemon acts on them (or,
 * for directories and lazytime, has nothing to do) and drops them. */
static const char *const atime_only[] = {
    "diratime",	   "nodiratime",    "relatime", "norelatime",
    "strictatime", "nostrictatime", "lazytime", "nolazytime",
};
static const char *const fuse_valued[] = {"fsname", "subtype", "max_read"};

/* mount(8) and fstab options that mean nothing to the file system: mount(8)
 * itself acts on them (or mount.fuse3 strips them), but a helper may still
 * see them, so they are accepted and dropped. */
static const char *const mount_flags[] = {
    "defaults", "auto", "noauto", "user", "nouser", "users", "owner", "group", "nofail", "_netdev",
};

static bool in_list(const char *s, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(s, list[i]) == 0)
			return true;
	return false;
}

#define IN_LIST(s, list) in_list((s), (list), sizeof(list) / sizeof((list)[0]))

/* The words an option with a fixed set of values takes, each with the
 * value it stands for; a NULL name ends the table. */
struct word {
	const char *name;
	int value;
};

static const struct word consistency_words[] = {
    {"softupdates", CONSISTENCY_SOFTUPDATES},
    {"none", CONSISTENCY_NONE},
    {"journal", CONSISTENCY_JOURNAL},
    {"journal-data", CONSISTENCY_JOURNAL_DATA},
    {NULL, 0},
};

static const struct word rename_order_words[] = {
    {"all", E2_RENAME_ORDER_ALL},
    {"file", E2_RENAME_ORDER_FILE},
    {"process", E2_RENAME_ORDER_PROCESS},
    {NULL, 0},
};

static const struct word errors_words[] = {
    {"continue", E2_ERRORS_CONTINUE},
    {"remount-ro", E2_ERRORS_RO},
    {"panic", E2_ERRORS_PANIC},
    {NULL, 0},
};

/* The value of the word s in words: 0 and *value, or -EINVAL. */
static int word_value(const struct word *words, const char *s, int *value)
{
	for (; words->name; words++)
		if (strcmp(s, words->name) == 0) {
			*value = words->value;
			return 0;
		}
	return -EINVAL;
}

void mountopt_init(struct mountopt *mo)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);

	memset(mo, 0, sizeof(*mo));
	mo->consistency = CONSISTENCY_SOFTUPDATES;
	if (pages > 0 && page > 0)
		mo->mem_bytes = (uint64_t)pages * (uint64_t)page;
	mo->nbd_retry_ms = MOUNTOPT_NBD_RETRY_MS;
}

enum e2_atime mountopt_atime(const struct mountopt *mo)
{
	if (mo->noatime)
		return E2_ATIME_NOATIME;
	return mo->strictatime ? E2_ATIME_STRICT : E2_ATIME_RELATIME;
}

void mountopt_free(struct mountopt *mo)
{
	free(mo->fuse_opts);
	mo->fuse_opts = NULL;
	free(mo->statsfile);
	mo->statsfile = NULL;
}

const char *mountopt_consistency_name(enum consistency c)
{
	for (const struct word *w = consistency_words; w->name; w++)
		if (w->value == (int)c)
			return w->name;
	return "softupdates";
}

int mountopt_parse_size(const char *s, uint64_t *out)
{
	return size_parse_flags(s, 1, SIZE_PARSE_B, out) < 0 ? -EINVAL : 0;
}

int mountopt_parse_seconds(const char *s, unsigned *ms)
{
	uint64_t sec = 0, frac = 0;
	unsigned ndigits = 0;
	const char *p = s;

	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p); p++) {
		sec = sec * 10 + (uint64_t)(*p - '0');
		if (sec > MOUNTOPT_FLUSH_MAX_MS / 1000)
			return -EINVAL;
	}
	if (*p == '.') {
		for (p++; isdigit((unsigned char)*p); p++) {
			if (++ndigits > 3)
				return -EINVAL;
			frac = frac * 10 + (uint64_t)(*p - '0');
		}
		if (ndigits == 0)
			return -EINVAL;
		for (unsigned i = ndigits; i < 3; i++)
			frac *= 10;
	}
	if (*p)
		return -EINVAL;
	sec = sec * 1000 + frac;
	/* 0 would mean "the default" further down, which is not what someone
	 * writing flush_interval=0 expects, so it is refused. */
	if (sec == 0 || sec > MOUNTOPT_FLUSH_MAX_MS)
		return -EINVAL;
	*ms = (unsigned)sec;
	return 0;
}

static void set_err(struct mountopt_error *err, enum mountopt_err kind, const char *name,
		    const char *value)
{
	if (!err)
		return;
	err->kind = kind;
	err->limit = 0;
	err->expect = NULL;
	snprintf(err->name, sizeof(err->name), "%s", name);
	snprintf(err->value, sizeof(err->value), "%s", value ? value : "");
}

/* Append one option to the pass-through string, escaping it again. */
static int append_fuse(struct mountopt *mo, const char *opt)
{
	size_t old = mo->fuse_opts ? strlen(mo->fuse_opts) : 0;
	size_t need = old + 1 + 2 * strlen(opt) + 1;
	char *s = realloc(mo->fuse_opts, need), *d;

	if (!s)
		return -ENOMEM;
	d = s + old;
	if (old)
		*d++ = ',';
	for (const char *p = opt; *p; p++) {
		if (*p == ',' || *p == '\\')
			*d++ = '\\';
		*d++ = *p;
	}
	*d = '\0';
	mo->fuse_opts = s;
	return 0;
}

/* One option, already unescaped: name, and value after '=' or NULL. */
/* What commit=, flush_interval= and lock_wait= take
 * (mountopt_parse_seconds()). */
static const char seconds[] = "seconds above 0 and at most 86400, with at most three decimals";

static int parse_one(struct mountopt *mo, char *opt, struct mountopt_error *err)
{
	char *eq = strchr(opt, '=');
	const char *val = NULL, *expect = NULL;
	uint64_t size;
	unsigned ms;
	int k;

	if (eq) {
		*eq = '\0';
		val = eq + 1;
	}
	if (strcmp(opt, "consistency") == 0) {
		if (!val)
			goto need_value;
		expect = "softupdates, none, journal or journal-data";
		if (word_value(consistency_words, val, &k) < 0)
			goto bad_value;
		mo->consistency = (enum consistency)k;
		mo->has_consistency = true;
		return 0;
	}
	if (strcmp(opt, "rename_order") == 0) {
		if (!val)
			goto need_value;
		expect = "all, file or process";
		if (word_value(rename_order_words, val, &k) < 0)
			goto bad_value;
		mo->rename_order = (enum e2_rename_order)k;
		return 0;
	}
	if (strcmp(opt, "errors") == 0) {
		if (!val)
			goto need_value;
		expect = "continue, remount-ro or panic";
		if (word_value(errors_words, val, &k) < 0)
			goto bad_value;
		mo->errors = (enum e2_errors)k;
		return 0;
	}
	if (strcmp(opt, "cache") == 0) {
		if (!val)
			goto need_value;
		expect = "a size from 1M to 1T, such as 512M";
		if (mountopt_parse_size(val, &size) < 0 || size < MOUNTOPT_CACHE_MIN ||
		    size > MOUNTOPT_CACHE_MAX)
			goto bad_value;
		if (mo->mem_bytes && size > mo->mem_bytes) {
			set_err(err, MOUNTOPT_TOO_LARGE, opt, val);
			if (err)
				err->limit = mo->mem_bytes;
			return -EINVAL;
		}
		mo->cache_bytes = size;
		return 0;
	}
	if (strcmp(opt, "commit") == 0) {
		if (!val)
			goto need_value;
		expect = seconds;
		if (mountopt_parse_seconds(val, &ms) < 0)
			goto bad_value;
		mo->commit_ms = ms;
		return 0;
	}
	if (strcmp(opt, "flush_interval") == 0) {
		if (!val)
			goto need_value;
		expect = seconds;
		if (mountopt_parse_seconds(val, &ms) < 0)
			goto bad_value;
		mo->flush_interval_ms = ms;
		return 0;
	}
	if (strcmp(opt, "max_threads") == 0) {
		uint64_t n;

		if (!val)
			goto need_value;
		expect = MOUNTOPT_THREADS_TAKES;
		if (num_parse(val, 1, MOUNTOPT_THREADS_MAX, &n) < 0)
			goto bad_value;
		mo->max_threads = (unsigned)n;
		return 0;
	}
	if (strcmp(opt, "lock_wait") == 0) {
		if (!val)
			goto need_value;
		expect = seconds;
		if (mountopt_parse_seconds(val, &ms) < 0)
			goto bad_value;
		mo->lock_wait_ms = ms;
		return 0;
	}
	if (strcmp(opt, "nbd_retry") == 0) {
		if (!val)
			goto need_value;
		/* 0: give up at the first connection loss */
		expect = "0, or seconds up to 86400 with at most three decimals";
		if (strcmp(val, "0") == 0)
			ms = 0;
		else if (mountopt_parse_seconds(val, &ms) < 0)
			goto bad_value;
		mo->nbd_retry_ms = ms;
		return 0;
	}
	if (strcmp(opt, "unsafe_no_flush") == 0) {
		if (val)
			goto no_value;
		mo->unsafe_no_flush = true;
		return 0;
	}
	if (strcmp(opt, "statsfile") == 0) {
		char *s;

		if (!val)
			goto need_value;
		if (!*val)
			goto bad_value;
		s = strdup(val);
		if (!s)
			return -ENOMEM;
		free(mo->statsfile);
		mo->statsfile = s;
		return 0;
	}
	if (strcmp(opt, "ro") == 0 || strcmp(opt, "rw") == 0) {
		if (val)
			goto no_value;
		mo->readonly = opt[1] == 'o';
		return 0; /* added to the libfuse string at the end */
	}
	if (strcmp(opt, "blkdev") == 0 || strcmp(opt, "noblkdev") == 0) {
		if (val)
			goto no_value;
		mo->blkdev = opt[0] == 'b';
		mo->has_blkdev = true;
		return 0; /* the daemon adds it with the device as fsname */
	}
	if (strcmp(opt, "debug") == 0) {
		if (val)
			goto no_value;
		mo->debug = true;
		return 0;
	}
	if (strcmp(opt, "default_permissions") == 0) {
		/* Always on: the kernel checks permissions, as the daemon is the
		 * file system's only writer and trusts the caller's credentials. */
		if (val)
			goto no_value;
		return 0;
	}
	if (IN_LIST(opt, mount_flags) || strncmp(opt, "x-", 2) == 0 ||
	    strcmp(opt, "comment") == 0) {
		/* nofail is mount(8)'s, but a helper must act on it itself:
		 * mount passes on the helper's exit status as it is */
		if (strcmp(opt, "nofail") == 0)
			mo->nofail = true;
		return 0;
	}
	if (IN_LIST(opt, fuse_flags)) {
		if (val)
			goto no_value;
		if (strcmp(opt, "allow_other") == 0)
			mo->allow_other = true;
		if (strcmp(opt, "allow_root") == 0)
			mo->allow_root = true;
		/* The kernel leaves a FUSE file's access time to the daemon,
		 * so these are the file system's.  libfuse knows only atime
		 * and noatime (shown in /proc/mounts); the rest would make it
		 * refuse the mount, and mean nothing to the kernel here. */
		if (strcmp(opt, "noatime") == 0 || strcmp(opt, "atime") == 0)
			mo->noatime = opt[0] == 'n';
		if (strcmp(opt, "strictatime") == 0 || strcmp(opt, "norelatime") == 0)
			mo->strictatime = true;
		if (strcmp(opt, "relatime") == 0 || strcmp(opt, "nostrictatime") == 0)
			mo->strictatime = false;
		if (strcmp(opt, "nodiratime") == 0 || strcmp(opt, "diratime") == 0)
			mo->nodiratime = opt[0] == 'n';
		/* (the kernel syncs a FUSE file's writes under sync, the
		 * daemon every other change, and under dirsync the names) */
		if (strcmp(opt, "sync") == 0 || strcmp(opt, "async") == 0)
			mo->sync = opt[0] == 's';
		if (strcmp(opt, "dirsync") == 0)
			mo->dirsync = true;
		if (IN_LIST(opt, atime_only))
			return 0;
		return append_fuse(mo, opt);
	}
	if (IN_LIST(opt, fuse_valued)) {
		if (!val)
			goto need_value;
		if (!*val)
			goto bad_value;
		if (strcmp(opt, "max_read") == 0) {
			char num[32];

			expect = "a size from 4K to 1G";
			if (mountopt_parse_size(val, &size) < 0 || size < 4096 || size > (1U << 30))
				goto bad_value;
			/* libfuse wants plain bytes */
			snprintf(num, sizeof(num), "max_read=%llu", (unsigned long long)size);
			return append_fuse(mo, num);
		}
		if (strcmp(opt, "fsname") == 0)
			mo->has_fsname = true;
		if (strcmp(opt, "subtype") == 0)
			mo->has_subtype = true;
		*eq = '=';
		return append_fuse(mo, opt);
	}
	set_err(err, MOUNTOPT_UNKNOWN, opt, val);
	return -EINVAL;
need_value:
	set_err(err, MOUNTOPT_NEED_VALUE, opt, NULL);
	return -EINVAL;
no_value:
	set_err(err, MOUNTOPT_NO_VALUE, opt, val);
	return -EINVAL;
bad_value:
	set_err(err, MOUNTOPT_BAD_VALUE, opt, val);
	if (err)
		err->expect = expect;
	return -EINVAL;
}

int mountopt_parse(struct mountopt *mo, const char *opts, struct mountopt_error *err)
{
	size_t len = strlen(opts);
	char *buf = malloc(len + 1);
	const char *p = opts;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	if (err)
		err->kind = MOUNTOPT_OK;
	while (*p) {
		char *d = buf;

		/* One option up to an unescaped comma; "\x" stands for x. */
		while (*p && *p != ',') {
			if (*p == '\\' && p[1])
				p++;
			*d++ = *p++;
		}
		*d = '\0';
		if (*p == ',')
			p++;
		if (!*buf)
			continue;
		ret = parse_one(mo, buf, err);
		if (ret < 0)
			goto out;
	}
out:
	free(buf);
	return ret;
}

size_t mountopt_cache_blocks(const struct mountopt *mo, uint32_t block_size)
{
	uint64_t n;

	if (!mo->cache_bytes || !block_size)
		return 0;
	n = mo->cache_bytes / block_size;
	if (n < 64)
		n = 64;
	if (n > SIZE_MAX)
		n = SIZE_MAX;
	return (size_t)n;
}

int mountopt_fuse_string(const struct mountopt *mo, const char *fsname, char **out)
{
	struct mountopt tmp = {.fuse_opts = NULL};
	int ret;

	if (mo->fuse_opts) {
		tmp.fuse_opts = strdup(mo->fuse_opts);
		if (!tmp.fuse_opts)
			return -ENOMEM;
	}
	ret = append_fuse(&tmp, mo->readonly ? "ro" : "rw");
	if (!ret && mo->blkdev)
		ret = append_fuse(&tmp, "blkdev");
	if (!ret)
		ret = append_fuse(&tmp, "default_permissions");
	if (!ret && !mo->has_fsname && fsname) {
		char *s = malloc(strlen(fsname) + sizeof("fsname="));

		if (!s) {
			ret = -ENOMEM;
			goto out;
		}
		strcpy(s, "fsname=");
		strcat(s, fsname);
		ret = append_fuse(&tmp, s);
		free(s);
	}
	if (!ret && !mo->has_subtype)
		ret = append_fuse(&tmp, "subtype=fstitch");
out:
	if (ret < 0) {
		free(tmp.fuse_opts);
		return ret;
	}
	*out = tmp.fuse_opts;
	return 0;
}

bool mountopt_ratelimit(struct mountopt_ratelimit *rl, uint64_t now_ms, uint64_t *missed)
{
	if (rl->used == 0 || now_ms < rl->start_ms || now_ms - rl->start_ms >= rl->window_ms) {
		rl->start_ms = now_ms;
		rl->used = 0;
	}
	if (rl->used >= rl->burst) {
		rl->suppressed++;
		return false;
	}
	rl->used++;
	if (missed)
		*missed = rl->suppressed;
	rl->suppressed = 0;
	return true;
}

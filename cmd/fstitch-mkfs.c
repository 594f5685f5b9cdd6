/* fstitch-mkfs: make an ext2 file system (ext3 with -j) in an image file or
 * on a block device.  Parsing and messages only; lib/mkfs/mkfs.c does the work.
 * Exit status (the mkfs family's): 0 success, 8 operational error, 16 usage
 * or syntax error. */
#include <argp.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bdev/bdev.h"
#include "cli/cliopt.h"
#include "mkfs/mkfs.h"
#include "util/size.h"

enum {
	EXIT_MKFS_OK = 0,
	EXIT_MKFS_ERROR = 8,
	EXIT_MKFS_USAGE = 16,
};

CLI_VERSION("fstitch-mkfs");

static const char doc[] =
    "Make an ext2 file system (revision 1; features filetype, sparse_super, "
    "large_file) in an image file or on a block device; with -j or -J, ext3: "
    "the same with a journal (has_journal)."
    "\v"
    "SIZE is a number of blocks of the block size (of 1024 bytes when -b is "
    "not given), as in mke2fs, or bytes with a suffix K, M, G or T (powers "
    "of 1024). Without SIZE the whole file or device is used; an image file "
    "that does not exist is created, and then SIZE is required. A file system "
    "or partition table already on the target is overwritten only with -F.\n"
    "\n"
    "The journal's default size is mke2fs's: 1024 blocks below 32768 blocks, "
    "4096 below 262144, and so on up to 262144 blocks; -J size=N asks for N "
    "MiB, which must make 1024 to 10240000 blocks and at most half of the "
    "free ones. A file system needs 2048 blocks or more to have a journal.\n"
    "\n"
    "Exit status: 0 success, 8 operational error, 16 usage or syntax error.";

static const char args_doc[] = "DEVICE|IMAGE [SIZE]";

static const struct argp_option options[] = {
    {NULL, 0, NULL, 0, "Layout:", 1},
    {"block-size", 'b', "BYTES", 0, "1024, 2048 or 4096 (default: by size)", 1},
    {"inodes", 'N', "COUNT", 0, "Number of inodes (rounded as mke2fs does)", 1},
    {"bytes-per-inode", 'i', "BYTES", 0, "One inode per BYTES (default: by size)", 1},
    {"inode-size", 'I', "BYTES", 0, "Inode size, 128 to the block size (default 256)", 1},
    {"reserved-percent", 'm', "PERCENT", 0, "Reserved for root, 0 to 50 (default 5)", 1},
    {"journal", 'j', NULL, 0, "Add a journal (ext3), of the default size", 1},
    {"journal-options", 'J', "size=MIB", 0, "Add a journal of MIB MiB", 1},
    {NULL, 0, NULL, 0, "Identity:", 2},
    {"label", 'L', "LABEL", 0, "Volume label, at most 16 bytes", 2},
    {"uuid", 'U', "UUID", 0, "A UUID, random (default), time or clear", 2},
    {NULL, 0, NULL, 0, "Behaviour:", 3},
    {"force", 'F', NULL, 0, "Overwrite an existing file system", 3},
    {"dry-run", 'n', NULL, 0, "Show what would be made; write nothing", 3},
    {0}};

struct args {
	struct mkfs_opts opts;
	const char *path;
	const char *size;
};

/* A byte count or count option: digits with an optional K/M/G/T suffix. */
static uint64_t parse_count(struct argp_state *state, const char *what, const char *arg,
			    uint64_t max)
{
	uint64_t v;
	int ret = size_parse(arg, 1, &v);

	if (ret == 0 && v > max)
		ret = -ERANGE;
	if (ret) {
		cli_error("invalid %s '%s': %s", what, arg,
			  ret == -ERANGE ? "too large" : "not a number");
		exit(EXIT_MKFS_USAGE);
	}
	return v;
}

/* -J's argument: comma-separated options, of which fstitch knows size=N
 * (MiB, a plain decimal number as mke2fs takes it). */
static void parse_journal_opts(struct args *a, const char *arg)
{
	const char *p = arg, *end;
	uint64_t n;
	size_t len;
	char *v;
	int r;

	for (;;) {
		end = strchr(p, ',');
		len = end ? (size_t)(end - p) : strlen(p);
		if (len > 5 && !strncmp(p, "size=", 5)) {
			v = strndup(p + 5, len - 5);
			if (!v) {
				cli_error("out of memory");
				exit(EXIT_MKFS_ERROR);
			}
			r = num_parse(v, 0, UINT32_MAX, &n);
			if (r == -EINVAL) {
				cli_error("invalid journal size '%s': not a number of MiB", v);
				exit(EXIT_MKFS_USAGE);
			}
			if (r < 0) {
				cli_error("invalid journal size '%s': too large", v);
				exit(EXIT_MKFS_USAGE);
			}
			if (n == 0) {
				cli_error("invalid journal size '%s': must be at least 1 MiB", v);
				exit(EXIT_MKFS_USAGE);
			}
			free(v);
			a->opts.journal_mib = (unsigned)n;
		} else {
			cli_error("invalid journal option '%.*s': only size=MIB is supported",
				  (int)len, p);
			exit(EXIT_MKFS_USAGE);
		}
		if (!end)
			break;
		p = end + 1;
	}
	a->opts.flags |= MKFS_JOURNAL;
}

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{
	struct args *a = state->input;
	char *end;

	switch (key) {
	case 'b':
		a->opts.block_size = (unsigned)parse_count(state, "block size", arg, 65536);
		if (!a->opts.block_size) {
			cli_error("invalid block size '%s': must be 1024, 2048 or 4096", arg);
			exit(EXIT_MKFS_USAGE);
		}
		break;
	case 'N':
		a->opts.inodes = parse_count(state, "inode count", arg, UINT32_MAX);
		if (!a->opts.inodes) {
			cli_error("invalid inode count '%s': must be at least 1", arg);
			exit(EXIT_MKFS_USAGE);
		}
		break;
	case 'i':
		a->opts.inode_ratio =
		    (unsigned)parse_count(state, "bytes per inode", arg, UINT32_MAX);
		if (!a->opts.inode_ratio) {
			cli_error("invalid bytes per inode '%s': must be at least 1024", arg);
			exit(EXIT_MKFS_USAGE);
		}
		break;
	case 'I':
		a->opts.inode_size = (unsigned)parse_count(state, "inode size", arg, 65536);
		if (!a->opts.inode_size) {
			cli_error("invalid inode size '%s': must be 128, 256, ...", arg);
			exit(EXIT_MKFS_USAGE);
		}
		break;
	case 'm':
		errno = 0;
		a->opts.reserved_percent = strtod(arg, &end);
		if (errno || end == arg || *end || !isfinite(a->opts.reserved_percent)) {
			cli_error("invalid reserved percentage '%s': not a number", arg);
			exit(EXIT_MKFS_USAGE);
		}
		break;
	case 'j':
		a->opts.flags |= MKFS_JOURNAL;
		break;
	case 'J':
		parse_journal_opts(a, arg);
		break;
	case 'L':
		a->opts.label = arg;
		break;
	case 'U':
		if (!strcmp(arg, "random")) {
			a->opts.uuid_mode = MKFS_UUID_RANDOM;
		} else if (!strcmp(arg, "time")) {
			a->opts.uuid_mode = MKFS_UUID_TIME;
		} else if (!strcmp(arg, "clear") || !strcmp(arg, "null")) {
			a->opts.uuid_mode = MKFS_UUID_CLEAR;
		} else if (uuid_parse(arg, a->opts.uuid) == 0) {
			a->opts.uuid_mode = MKFS_UUID_GIVEN;
		} else {
			cli_error("invalid UUID '%s': not a UUID, 'random', 'time' or 'clear'",
				  arg);
			exit(EXIT_MKFS_USAGE);
		}
		break;
	case 'F':
		a->opts.flags |= MKFS_FORCE;
		break;
	case 'n':
		a->opts.flags |= MKFS_DRY_RUN;
		break;
	case ARGP_KEY_ARG:
		if (!a->path)
			a->path = arg;
		else if (!a->size)
			a->size = arg;
		else
			argp_error(state, "too many arguments: '%s'", arg);
		break;
	case ARGP_KEY_NO_ARGS:
		argp_error(state, "no device or image file given");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

static const struct argp_child children[] = {{&cliopt_verbosity_argp, 0, "Output:", 4}, {0}};

static const struct argp argp = {
    .options = options,
    .parser = parse_opt,
    .args_doc = args_doc,
    .doc = doc,
    .children = children,
};

static void print_summary(const char *path, const struct mkfs_info *in, bool dry)
{
	char sz[32], uuid[37];
	unsigned i;

	uuid_unparse(in->uuid, uuid);
	printf("%s an %s file system on '%s'%s\n", dry ? "Would make" : "Made",
	       in->journal_blocks ? "ext3" : "ext2", path,
	       in->created ? (dry ? " (a new image file)" : " (new image file)") : "");
	if (in->found[0])
		printf("  %-12s %s\n", dry ? "would overwrite" : "overwrote", in->found);
	printf("  %-12s %s: %llu blocks of %u bytes\n", "size",
	       size_format(in->blocks * in->block_size, sz, sizeof(sz)),
	       (unsigned long long)in->blocks, in->block_size);
	printf("  %-12s %llu of %u bytes, one per %llu bytes\n", "inodes",
	       (unsigned long long)in->inodes, in->inode_size,
	       (unsigned long long)(in->blocks * in->block_size / in->inodes));
	printf("  %-12s %u (%u blocks and %u inodes per group)\n", "groups", in->groups,
	       in->blocks_per_group, in->inodes_per_group);
	printf("  %-12s %llu blocks (%.2f%%) for the super user\n", "reserved",
	       (unsigned long long)in->reserved_blocks,
	       100.0 * (double)in->reserved_blocks / (double)in->blocks);
	if (in->label[0])
		printf("  %-12s %s\n", "label", in->label);
	printf("  %-12s %s\n", "UUID", uuid);
	printf("  %-12s %s%s\n", "features", in->journal_blocks ? "has_journal " : "",
	       "filetype sparse_super large_file");
	if (in->journal_blocks)
		printf("  %-12s %s: %llu blocks\n", "journal",
		       size_format(in->journal_blocks * in->block_size, sz, sizeof(sz)),
		       (unsigned long long)in->journal_blocks);
	if (cliopt.verbosity > 0)
		printf("  %-12s %llu blocks, %llu inodes\n", "free",
		       (unsigned long long)in->free_blocks, (unsigned long long)in->free_inodes);
	if (in->nbackups) {
		printf("  %-12s", "backups at");
		for (i = 0; i < in->nbackups; i++)
			printf(" %llu", (unsigned long long)in->backups[i]);
		printf("\n");
	}
	if (dry)
		printf("Dry run: nothing was written\n");
}

static void say_waiting(const char *path)
{
	if (cliopt.verbosity >= 0)
		cli_error("waiting for the fstitch daemon still writing '%s' back after its "
			  "unmount",
			  path);
}

int main(int argc, char **argv)
{
	struct args a = {0};
	struct mkfs_info info;
	uint64_t unit;
	char err[512];
	struct stat st;
	int ret;

	mkfs_opts_init(&a.opts);
	a.opts.waiting = say_waiting;
	argp_err_exit_status = EXIT_MKFS_USAGE;
	/* getopt names the program by argv[0]; make its messages match ours
	 * ("fstitch-mkfs: ...", not the full path it was run by). */
	argv[0] = program_invocation_short_name;
	argp_parse(&argp, argc, argv, 0, NULL, &a);

	if (a.size) {
		/* A plain SIZE counts blocks, as in mke2fs: of -b's size, or
		 * 1 KiB when -b is not given. */
		unit = a.opts.block_size ? a.opts.block_size : 1024;
		ret = size_parse(a.size, unit, &a.opts.size);
		if (ret || a.opts.size == 0) {
			cli_error("invalid size '%s': %s", a.size,
				  ret == -ERANGE ? "too large"
				  : ret ? "not a number of blocks or a size with K, M, G or T"
					: "must not be zero");
			return EXIT_MKFS_USAGE;
		}
	} else if (!bdev_nbd_is_uri(a.path) && stat(a.path, &st) < 0 && errno == ENOENT) {
		cli_error("'%s' does not exist; give a SIZE to create it", a.path);
		return EXIT_MKFS_USAGE;
	}

	ret = mkfs_make(a.path, &a.opts, &info, err, sizeof(err));
	if (ret == -EEXIST) {
		cli_error("%s; use -F to overwrite", err);
		return EXIT_MKFS_ERROR;
	}
	if (ret) {
		cli_error("%s", err);
		return ret == -EINVAL ? EXIT_MKFS_USAGE : EXIT_MKFS_ERROR;
	}
	if (cliopt.verbosity >= 0)
		print_summary(a.path, &info, a.opts.flags & MKFS_DRY_RUN);
	if (fflush(stdout) == EOF || ferror(stdout)) {
		cli_error("cannot write the summary: %s", strerror(errno));
		return EXIT_MKFS_ERROR;
	}
	return EXIT_MKFS_OK;
}

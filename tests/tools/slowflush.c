/* slowflush DELAY_US SOURCE MOUNTPOINT: a disk whose cache flush takes
 * DELAY_US microseconds, for the benchmarks (tests/bench/fs_bench.sh).
 *
 * A FUSE passthrough of the directory SOURCE on MOUNTPOINT.  Reads and
 * writes go to SOURCE's files; every fsync or fdatasync of a file first
 * sleeps DELAY_US, then does the real fdatasync/fsync.  Flushes are
 * serialised, as a single disk's are, so that "flushes x DELAY_US" is a
 * lower bound of the time any workload spent flushing: the bench checks
 * its elapsed time against it.  The kernel's write-back cache of the mount
 * stands for the disk's volatile cache: writes are cheap, a flush pays.
 *
 * Every contender's image lives under the mount: fstitch and fuse2fs use
 * the image file, the kernel contenders a loop device over it (the loop
 * driver turns a block-layer cache flush into an fsync of its backing file,
 * so the kernel pays the same delay).
 *
 * The number of flushes so far is the value of the extended attribute
 * "user.slowflush.flushes" of the mount's root (getfattr --only-values -n
 * user.slowflush.flushes MOUNTPOINT); "user.slowflush.delay_us" is the
 * delay, and "user.slowflush.real_us" the time spent in the real flushes
 * so far (the host disk's own cost).  Runs in the foreground; unmount with fusermount3 -u.
 * Exit status: 0 unmounted, 1 the mount failed, 64 usage. */
#define FUSE_USE_VERSION 314
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <fuse.h>

static int src_fd = -1;
static long delay_us;
static atomic_uint_fast64_t flushes;
static atomic_uint_fast64_t real_ns; /* time in the real fdatasync/fsync */
static pthread_mutex_t flush_lock = PTHREAD_MUTEX_INITIALIZER;

#define XATTR_FLUSHES "user.slowflush.flushes"
#define XATTR_DELAY "user.slowflush.delay_us"
#define XATTR_REAL "user.slowflush.real_us"

/* rel PATH: PATH relative to SOURCE ("/" is SOURCE itself) */
static const char *rel(const char *path)
{
	return path[1] ? path + 1 : ".";
}

static int fd_of(struct fuse_file_info *fi)
{
	return (int)fi->fh;
}

static void *sf_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	/* The page cache of the mount plays the disk's write cache. */
	if (conn->capable & FUSE_CAP_WRITEBACK_CACHE)
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	cfg->kernel_cache = 1;
	cfg->use_ino = 1;
	cfg->nullpath_ok = 1;
	return NULL;
}

static int sf_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	int r = fi ? fstat(fd_of(fi), st) : fstatat(src_fd, rel(path), st, AT_SYMLINK_NOFOLLOW);

	return r < 0 ? -errno : 0;
}

static int sf_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	int fd = openat(src_fd, rel(path), O_RDONLY | O_DIRECTORY);
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		struct stat st = { .st_ino = de->d_ino, .st_mode = (mode_t)de->d_type << 12 };

		if (fill(buf, de->d_name, &st, 0, 0))
			break;
	}
	closedir(d);
	return 0;
}

static int sf_mkdir(const char *path, mode_t mode)
{
	return mkdirat(src_fd, rel(path), mode) < 0 ? -errno : 0;
}

static int sf_unlink(const char *path)
{
	return unlinkat(src_fd, rel(path), 0) < 0 ? -errno : 0;
}

static int sf_rmdir(const char *path)
{
	return unlinkat(src_fd, rel(path), AT_REMOVEDIR) < 0 ? -errno : 0;
}

static int sf_rename(const char *from, const char *to, unsigned int flags)
{
	return renameat2(src_fd, rel(from), src_fd, rel(to), flags) < 0 ? -errno : 0;
}

static int sf_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	int r = fi ? fchmod(fd_of(fi), mode) : fchmodat(src_fd, rel(path), mode, 0);

	return r < 0 ? -errno : 0;
}

static int sf_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	int r = fi ? fchown(fd_of(fi), uid, gid)
		   : fchownat(src_fd, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW);

	return r < 0 ? -errno : 0;
}

static int sf_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	int fd, r;

	if (fi)
		return ftruncate(fd_of(fi), size) < 0 ? -errno : 0;
	fd = openat(src_fd, rel(path), O_WRONLY);
	if (fd < 0)
		return -errno;
	r = ftruncate(fd, size) < 0 ? -errno : 0;
	close(fd);
	return r;
}

static int sf_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	int r = fi ? futimens(fd_of(fi), tv)
		   : utimensat(src_fd, rel(path), tv, AT_SYMLINK_NOFOLLOW);

	return r < 0 ? -errno : 0;
}

/* With the kernel's write-back cache, the kernel reads pages of files
 * opened write-only and applies O_APPEND itself. */
static int open_flags(int flags)
{
	if ((flags & O_ACCMODE) == O_WRONLY)
		flags = (flags & ~O_ACCMODE) | O_RDWR;
	return flags & ~O_APPEND;
}

static int sf_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	int fd = openat(src_fd, rel(path), open_flags(fi->flags) | O_CREAT, mode);

	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	return 0;
}

static int sf_open(const char *path, struct fuse_file_info *fi)
{
	int fd = openat(src_fd, rel(path), open_flags(fi->flags));

	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	return 0;
}

static int sf_read(const char *path, char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	ssize_t n = pread(fd_of(fi), buf, size, off);

	return n < 0 ? -errno : (int)n;
}

static int sf_write(const char *path, const char *buf, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	ssize_t n = pwrite(fd_of(fi), buf, size, off);

	return n < 0 ? -errno : (int)n;
}

static int sf_release(const char *path, struct fuse_file_info *fi)
{
	close(fd_of(fi));
	return 0;
}

/* The emulated cache flush: one at a time, DELAY_US each, then the real one. */
static int sf_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	struct timespec ts = { .tv_sec = delay_us / 1000000, .tv_nsec = (delay_us % 1000000) * 1000 };
	struct timespec t0, t1;
	int r;

	pthread_mutex_lock(&flush_lock);
	while (delay_us > 0 && nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = datasync ? fdatasync(fd_of(fi)) : fsync(fd_of(fi));
	r = r < 0 ? -errno : 0;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	atomic_fetch_add(&real_ns, (uint_fast64_t)((t1.tv_sec - t0.tv_sec) * 1000000000LL +
						   (t1.tv_nsec - t0.tv_nsec)));
	atomic_fetch_add(&flushes, 1);
	pthread_mutex_unlock(&flush_lock);
	return r;
}

static int sf_fallocate(const char *path, int mode, off_t off, off_t len,
			struct fuse_file_info *fi)
{
	return fallocate(fd_of(fi), mode, off, len) < 0 ? -errno : 0;
}

/* Holes as the source has them (SEEK_HOLE, SEEK_DATA), as a disk's image
 * file shows them without the emulation. */
static off_t sf_lseek(const char *path, off_t off, int whence, struct fuse_file_info *fi)
{
	off_t r = lseek(fd_of(fi), off, whence);

	return r < 0 ? -errno : r;
}

static int sf_statfs(const char *path, struct statvfs *sv)
{
	return fstatvfs(src_fd, sv) < 0 ? -errno : 0;
}

/* The counters, as attributes of the root: a number in decimal. */
static int sf_getxattr(const char *path, const char *name, char *val, size_t size)
{
	char buf[32];
	int n;

	if (strcmp(path, "/") != 0)
		return -ENODATA;
	if (strcmp(name, XATTR_FLUSHES) == 0)
		n = snprintf(buf, sizeof(buf), "%" PRIuFAST64, atomic_load(&flushes));
	else if (strcmp(name, XATTR_REAL) == 0)
		n = snprintf(buf, sizeof(buf), "%" PRIuFAST64, atomic_load(&real_ns) / 1000);
	else if (strcmp(name, XATTR_DELAY) == 0)
		n = snprintf(buf, sizeof(buf), "%ld", delay_us);
	else
		return -ENODATA;
	if (size == 0)
		return n;
	if (size < (size_t)n)
		return -ERANGE;
	memcpy(val, buf, (size_t)n);
	return n;
}

static const struct fuse_operations ops = {
	.init = sf_init,
	.getattr = sf_getattr,
	.readdir = sf_readdir,
	.mkdir = sf_mkdir,
	.unlink = sf_unlink,
	.rmdir = sf_rmdir,
	.rename = sf_rename,
	.chmod = sf_chmod,
	.chown = sf_chown,
	.truncate = sf_truncate,
	.utimens = sf_utimens,
	.create = sf_create,
	.open = sf_open,
	.read = sf_read,
	.write = sf_write,
	.release = sf_release,
	.fsync = sf_fsync,
	.fallocate = sf_fallocate,
	.lseek = sf_lseek,
	.statfs = sf_statfs,
	.getxattr = sf_getxattr,
};

int main(int argc, char **argv)
{
	char *end;
	char *fargv[] = { argv[0], "-f", "-o",
			  "fsname=slowflush,subtype=slowflush,default_permissions,max_threads=16",
			  NULL, NULL };
	int r;

	if (argc != 4) {
		fprintf(stderr, "usage: slowflush DELAY_US SOURCE MOUNTPOINT\n");
		return 64;
	}
	errno = 0;
	delay_us = strtol(argv[1], &end, 10);
	if (errno || end == argv[1] || *end || delay_us < 0 || delay_us > 10000000) {
		fprintf(stderr, "slowflush: bad delay '%s': want microseconds, 0 to 10000000\n",
			argv[1]);
		return 64;
	}
	src_fd = open(argv[2], O_RDONLY | O_DIRECTORY);
	if (src_fd < 0) {
		fprintf(stderr, "slowflush: cannot open '%s': %s\n", argv[2], strerror(errno));
		return 1;
	}
	umask(0);
	fargv[4] = argv[3];
	r = fuse_main(5, fargv, &ops, NULL);
	fprintf(stderr, "slowflush: %" PRIuFAST64 " flushes of %ld us\n", atomic_load(&flushes),
		delay_us);
	return r ? 1 : 0;
}

/* The control socket, client side: connecting, finding a mount's socket
 * and one request at a time (see ctl.h).  This file and ctl.h are all of
 * the protocol that the public library (lib/api) links. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>
#include "ctl.h"

int ctl_addr(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

/* A path in a mount whose daemon died answers ENOTCONN ("transport
 * endpoint is not connected"): that is the daemon being gone, which the
 * client side reports as ECONNRESET everywhere, so that ENOTCONN keeps its
 * one meaning in the API (pg_disengage of a group not engaged). */
static int gone(int err)
{
	return err == -ENOTCONN ? -ECONNRESET : err;
}

/* The attribute is asked for first: every client call from inside a mount
 * (pgrun, the API) then costs one system call here, not two.  A socket has
 * no user attributes (ENODATA), so only a failed lookup needs the stat. */
int ctl_find_socket(const char *where, char *buf, size_t size)
{
	struct stat st;
	ssize_t n;
	int err;

	n = getxattr(where, CTL_XATTR, buf, size - 1);
	if (n >= 0) {
		buf[n] = '\0';
		return 0;
	}
	err = errno;
	if (err != ENODATA && err != ENOTSUP && err != ERANGE && err != EPERM)
		return gone(-err);
	if (stat(where, &st) < 0)
		return gone(-errno);
	if (S_ISSOCK(st.st_mode)) {
		if (strlen(where) >= size)
			return -ENAMETOOLONG;
		strcpy(buf, where);
		return 0;
	}
	return -ENXIO;
}

int ctl_connect(const char *path, int *fd)
{
	struct sockaddr_un sa;
	int r, s;

	r = ctl_addr(path, &sa);
	if (r < 0)
		return r;
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	/* In a process started with standard output (or input, or error)
	 * closed, the socket would take that descriptor, and what the
	 * program prints would go to the daemon as requests.  Keep it above
	 * them. */
	if (s <= STDERR_FILENO) {
		int moved = fcntl(s, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);

		r = moved < 0 ? -errno : 0;
		close(s);
		if (r < 0)
			return r;
		s = moved;
	}
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		close(s);
		return r;
	}
	*fd = s;
	return 0;
}

int ctl_call_payload(int fd, const struct ctl_req *req, struct ctl_rep *rep, void **buf,
		     size_t *len, size_t max)
{
	size_t want, off = 0;
	char *b;
	ssize_t n;
	int r;

	*buf = NULL;
	*len = 0;
	r = ctl_call(fd, req, rep);
	if (r < 0 || rep->err)
		return r;
	if (rep->id < 0 || (uint64_t)rep->id > max)
		return -EMSGSIZE;
	want = (size_t)rep->id;
	if (want == 0)
		return 0;
	b = malloc(want);
	if (!b)
		return -ENOMEM;
	/* Each message is one chunk; asking for the rest takes it whole. */
	while (off < want) {
		do
			n = recv(fd, b + off, want - off, 0);
		while (n < 0 && errno == EINTR);
		if (n <= 0) {
			r = n < 0 ? -errno : -ECONNRESET;
			free(b);
			return r;
		}
		off += (size_t)n;
	}
	*buf = b;
	*len = want;
	return 0;
}

int ctl_call(int fd, const struct ctl_req *req, struct ctl_rep *rep)
{
	struct ctl_rep r;
	ssize_t n;

	if (send(fd, req, sizeof(*req), MSG_NOSIGNAL) != sizeof(*req))
		return -errno ? -errno : -EIO;
	do
		n = recv(fd, &r, sizeof(r), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -ECONNRESET;
	if ((size_t)n != sizeof(r) || r.magic != CTL_MAGIC || r.version != CTL_VERSION)
		return -EPROTO;
	*rep = r;
	return 0;
}

/* The control socket, daemon side: the listening socket and one thread
 * per connection (see ctl.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "ctl.h"

struct conn {
	struct ctl_server *s;
	int fd;
	struct ctl_peer peer;
	bool refused; /* not allowed by the server's access: EACCES to all */
	struct conn *next;
};

/* At most this many connections are served at once (a thread each). */
#define CTL_MAX_CONNS 256
/* How long the accept loop waits when it cannot take a connection now. */
#define CTL_BACKOFF_MS 50

struct ctl_server {
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int lfd;
	int stopfd[2];
	ctl_handler fn;
	void *arg;
	struct ctl_access acc;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t gone;
	struct conn *conns;
	size_t nconns;
	bool stopping;
};

/* Send (or, when send is false, drop) the attached payload.  0 or -1. */
static int send_payload(int fd, struct ctl_payload *pl, bool send_it)
{
	char *b = pl->buf;
	size_t len = pl->len, off = 0, n;
	int r = 0;

	pl->buf = NULL;
	pl->len = 0;
	while (send_it && off < len) {
		n = len - off < CTL_PAYLOAD_CHUNK ? len - off : CTL_PAYLOAD_CHUNK;
		if (send(fd, b + off, n, MSG_NOSIGNAL) != (ssize_t)n) {
			r = -1;
			break;
		}
		off += n;
	}
	free(b);
	return r;
}

void ctl_dispatch(ctl_handler fn, void *arg, const struct ctl_peer *peer, const void *msg,
		  size_t len, struct ctl_rep *rep, struct ctl_payload *pl)
{
	struct ctl_req req;

	memset(rep, 0, sizeof(*rep));
	rep->magic = CTL_MAGIC;
	rep->version = CTL_VERSION;
	pl->buf = NULL;
	pl->len = 0;
	/* Anything but one whole request of our version is refused before a
	 * handler sees it: the handlers trust the layout. */
	if (len != sizeof(req)) {
		rep->err = EPROTO;
		return;
	}
	memcpy(&req, msg, sizeof(req));
	if (req.magic != CTL_MAGIC || req.version < CTL_VERSION_MIN || req.version > CTL_VERSION) {
		rep->err = EPROTO;
		return;
	}
	/* An older client gets the reply of its own version. */
	rep->version = req.version;
	rep->op = req.op;
	fn(arg, peer, &req, rep, pl);
}

bool ctl_access_allows(const struct ctl_access *acc, const struct ctl_peer *peer)
{
	return acc->allow_other || peer->uid == acc->owner ||
	       (acc->allow_root && peer->uid == 0);
}

static void refuse(void *arg, const struct ctl_peer *peer, const struct ctl_req *req,
		   struct ctl_rep *rep, struct ctl_payload *pl)
{
	(void)arg;
	(void)peer;
	(void)req;
	(void)pl;
	rep->err = EACCES;
}

static void *conn_main(void *arg)
{
	struct conn *c = arg, **pp;
	struct ctl_server *s = c->s;
	struct ctl_req req;
	struct ctl_rep rep;
	struct ctl_payload pl = {0};
	size_t len;
	ssize_t n;

	for (;;) {
		n = recv(c->fd, &req, sizeof(req), 0);
		if (n <= 0)
			break;
		/* A refused peer still gets an answer, so that it can say
		 * why rather than see a connection that just ends. */
		ctl_dispatch(c->refused ? refuse : s->fn, s->arg, &c->peer, &req, (size_t)n,
			     &rep, &pl);
		len = ctl_rep_size(rep.version);
		if (send(c->fd, &rep, len, MSG_NOSIGNAL) != (ssize_t)len) {
			send_payload(c->fd, &pl, false);
			break;
		}
		if (send_payload(c->fd, &pl, rep.err == 0) < 0)
			break;
	}
	pthread_mutex_lock(&s->lock);
	for (pp = &s->conns; *pp != c; pp = &(*pp)->next)
		;
	*pp = c->next;
	s->nconns--;
	close(c->fd);
	pthread_cond_broadcast(&s->gone);
	pthread_mutex_unlock(&s->lock);
	free(c);
	return NULL;
}

static void *accept_main(void *arg)
{
	struct ctl_server *s = arg;
	struct pollfd pf[2] = { { .fd = s->lfd, .events = POLLIN },
				{ .fd = s->stopfd[0], .events = POLLIN } };
	struct ucred cr;
	socklen_t len;
	pthread_attr_t attr;
	pthread_t t;
	struct conn *c;
	bool full;
	int fd;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (;;) {
		if (poll(pf, 2, -1) < 0)
			continue;
		if (pf[1].revents)
			break;
		/* With allow_other the socket is open to every user: one
		 * thread per connection must have a bound.  Beyond it, new clients wait in the
		 * listen backlog until a connection ends. */
		pthread_mutex_lock(&s->lock);
		full = s->nconns >= CTL_MAX_CONNS;
		pthread_mutex_unlock(&s->lock);
		if (full) {
			poll(&pf[1], 1, CTL_BACKOFF_MS);
			continue;
		}
		fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			/* Out of descriptors or memory: the pending connection
			 * stays readable, so retrying at once would spin. */
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM)
				poll(&pf[1], 1, CTL_BACKOFF_MS);
			continue;
		}
		len = sizeof(cr);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
			close(fd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->s = s;
		c->fd = fd;
		c->peer.pid = cr.pid;
		c->peer.uid = cr.uid;
		c->peer.gid = cr.gid;
		c->refused = !ctl_access_allows(&s->acc, &c->peer);
		pthread_mutex_lock(&s->lock);
		c->next = s->conns;
		s->conns = c;
		s->nconns++;
		if (pthread_create(&t, &attr, conn_main, c) != 0) {
			s->conns = c->next;
			s->nconns--;
			close(fd);
			free(c);
		}
		pthread_mutex_unlock(&s->lock);
	}
	pthread_attr_destroy(&attr);
	return NULL;
}

int ctl_server_start(const char *path, const struct ctl_access *acc, ctl_handler fn, void *arg,
		     struct ctl_server **out)
{
	struct ctl_server *s = calloc(1, sizeof(*s));
	struct sockaddr_un sa;
	struct stat st;
	int r;

	if (!s)
		return -ENOMEM;
	s->lfd = -1;
	s->stopfd[0] = s->stopfd[1] = -1;
	r = ctl_addr(path, &sa);
	if (r < 0)
		goto fail;
	strcpy(s->path, path);
	/* A socket left by a daemon that died is ours to replace; anything
	 * else at that path is not. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			r = -EEXIST;
			goto fail;
		}
		unlink(path);
	}
	s->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s->lfd < 0 || pipe2(s->stopfd, O_CLOEXEC) < 0) {
		r = -errno;
		goto fail;
	}
	if (bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		goto fail;
	}
	if (acc)
		s->acc = *acc;
	else
		s->acc.owner = geteuid();
	/* The mode keeps other users out before they can even connect; the
	 * peer check above covers root, whom the mode does not stop. */
	if (chmod(path, s->acc.allow_other ? 0666 : 0600) < 0 || listen(s->lfd, 64) < 0) {
		r = -errno;
		unlink(path);
		goto fail;
	}
	s->fn = fn;
	s->arg = arg;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->gone, NULL);
	r = -pthread_create(&s->thread, NULL, accept_main, s);
	if (r < 0) {
		unlink(path);
		goto fail;
	}
	*out = s;
	return 0;
fail:
	if (s->lfd >= 0)
		close(s->lfd);
	if (s->stopfd[0] >= 0) {
		close(s->stopfd[0]);
		close(s->stopfd[1]);
	}
	free(s);
	return r;
}

void ctl_server_stop(struct ctl_server *s)
{
	struct conn *c;
	char b = 1;

	if (!s)
		return;
	if (write(s->stopfd[1], &b, 1) < 0) {
		/* A pipe with room for one byte cannot fail here. */
	}
	pthread_join(s->thread, NULL);
	unlink(s->path);
	close(s->lfd);
	pthread_mutex_lock(&s->lock);
	/* Wake every connection thread; one that is answering a request
	 * finishes it first and then sees the end of its socket. */
	for (c = s->conns; c; c = c->next)
		shutdown(c->fd, SHUT_RDWR);
	while (s->nconns)
		pthread_cond_wait(&s->gone, &s->lock);
	pthread_mutex_unlock(&s->lock);
	close(s->stopfd[0]);
	close(s->stopfd[1]);
	pthread_cond_destroy(&s->gone);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

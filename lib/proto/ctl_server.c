/* The control socket, daemon side: the listening socket, and a thread per
 * connection being served, taken from a few kept between connections (see
 * ctl.h). */
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
/* How many threads wait for the next connection once theirs has ended.  A
 * client that connects, asks once and exits (pgrun) then finds a thread
 * waiting: no thread is created or ended per connection. */
#define CTL_IDLE_MAX 2
/* How long a thread waits when it cannot take a connection now. */
#define CTL_BACKOFF_MS 50

/* Threads take turns: one, the listener, waits on the socket; the other
 * idle ones wait for its turn.  The listener takes a connection, hands the
 * turn on and serves it; a thread that ends up the last idle one first
 * starts another, so that a listener is always there. */
struct ctl_server {
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int lfd; /* non-blocking */
	int stopfd[2];
	ctl_handler fn;
	void *arg;
	struct ctl_access acc;
	pthread_attr_t attr;
	pthread_mutex_t lock;
	pthread_cond_t gone; /* a thread has ended */
	pthread_cond_t turn; /* the listener's turn is free */
	struct conn *conns;
	size_t nconns;
	size_t nthreads;
	size_t nidle;	 /* threads not serving a connection */
	size_t nstarted; /* threads started, ever */
	bool listening;	 /* some thread is the listener */
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
	return acc->allow_other || peer->uid == acc->owner || (acc->allow_root && peer->uid == 0);
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

/* Answer c's requests until the client goes away, then forget it. */
static void serve(struct ctl_server *s, struct conn *c)
{
	struct conn **pp;
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
		ctl_dispatch(c->refused ? refuse : s->fn, s->arg, &c->peer, &req, (size_t)n, &rep,
			     &pl);
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
	pthread_mutex_unlock(&s->lock);
	free(c);
}

/* Wait, as the listener, for a connection: the new connection, or NULL
 * when the server stops.  Called and returns with s->lock held. */
static struct conn *listen_one(struct ctl_server *s)
{
	struct pollfd pf[2] = {{.fd = s->lfd, .events = POLLIN},
			       {.fd = s->stopfd[0], .events = POLLIN}};
	struct ucred cr;
	socklen_t len;
	struct conn *c;
	int fd;

	while (!s->stopping) {
		pthread_mutex_unlock(&s->lock);
		fd = -1;
		if (poll(pf, 2, -1) < 0 || pf[1].revents)
			goto next;
		/* With allow_other the socket is open to every user: one
		 * thread per connection must have a bound.  Beyond it, new
		 * clients wait in the listen backlog until a connection
		 * ends. */
		pthread_mutex_lock(&s->lock);
		if (s->nconns >= CTL_MAX_CONNS) {
			pthread_mutex_unlock(&s->lock);
			poll(&pf[1], 1, CTL_BACKOFF_MS);
			goto next;
		}
		pthread_mutex_unlock(&s->lock);
		fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			/* Out of descriptors or memory: the pending connection
			 * stays readable, so retrying at once would spin. */
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM)
				poll(&pf[1], 1, CTL_BACKOFF_MS);
			goto next;
		}
		len = sizeof(cr);
		c = calloc(1, sizeof(*c));
		if (!c || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
			free(c);
			close(fd);
			goto next;
		}
		c->s = s;
		c->fd = fd;
		c->peer.pid = cr.pid;
		c->peer.uid = cr.uid;
		c->peer.gid = cr.gid;
		c->refused = !ctl_access_allows(&s->acc, &c->peer);
		pthread_mutex_lock(&s->lock);
		if (s->stopping) {
			close(fd);
			free(c);
			break;
		}
		c->next = s->conns;
		s->conns = c;
		s->nconns++;
		return c;
	next:
		pthread_mutex_lock(&s->lock);
	}
	return NULL;
}

static void *worker_main(void *arg);

/* Start one more idle thread.  Called with s->lock held. */
static void spawn_worker(struct ctl_server *s)
{
	pthread_t t;

	s->nthreads++;
	s->nidle++;
	if (pthread_create(&t, &s->attr, worker_main, s) != 0) {
		s->nthreads--;
		s->nidle--;
		return;
	}
	s->nstarted++;
}

static void *worker_main(void *arg)
{
	struct ctl_server *s = arg;
	struct conn *c;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		/* idle: counted in s->nidle */
		while (s->listening && !s->stopping)
			pthread_cond_wait(&s->turn, &s->lock);
		if (s->stopping)
			break;
		s->listening = true;
		c = listen_one(s);
		s->listening = false;
		pthread_cond_signal(&s->turn);
		if (!c)
			break;
		/* The next client must find a listener: if no other thread
		 * is idle, start one (it waits for the turn handed on). */
		s->nidle--;
		if (s->nidle == 0 && !s->stopping)
			spawn_worker(s);
		pthread_mutex_unlock(&s->lock);
		serve(s, c);
		pthread_mutex_lock(&s->lock);
		if (s->nidle >= CTL_IDLE_MAX) {
			s->nidle++; /* counted out just below */
			break;
		}
		s->nidle++;
	}
	s->nidle--;
	s->nthreads--;
	pthread_cond_broadcast(&s->gone);
	pthread_mutex_unlock(&s->lock);
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
	/* Non-blocking: a connection that went away between the poll and
	 * the accept must not leave the listener stuck in accept. */
	s->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
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
	pthread_cond_init(&s->turn, NULL);
	pthread_attr_init(&s->attr);
	pthread_attr_setdetachstate(&s->attr, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&s->lock);
	spawn_worker(s);
	r = s->nthreads ? 0 : -EAGAIN;
	pthread_mutex_unlock(&s->lock);
	if (r < 0) {
		pthread_attr_destroy(&s->attr);
		pthread_cond_destroy(&s->turn);
		pthread_cond_destroy(&s->gone);
		pthread_mutex_destroy(&s->lock);
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

void ctl_server_threads(struct ctl_server *s, size_t *started, size_t *idle)
{
	pthread_mutex_lock(&s->lock);
	*started = s->nstarted;
	*idle = s->nidle;
	pthread_mutex_unlock(&s->lock);
}

void ctl_server_stop(struct ctl_server *s)
{
	struct conn *c;
	char b = 1;

	if (!s)
		return;
	unlink(s->path);
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_cond_broadcast(&s->turn);
	/* The listener sees the byte in its poll (the pipe stays readable). */
	if (write(s->stopfd[1], &b, 1) < 0) {
		/* A pipe with room for one byte cannot fail here. */
	}
	/* Wake every thread serving a connection; one that is answering a
	 * request finishes it first and then sees the end of its socket.
	 * No connection is taken once stopping is set. */
	while (s->nthreads) {
		for (c = s->conns; c; c = c->next)
			shutdown(c->fd, SHUT_RDWR);
		pthread_cond_wait(&s->gone, &s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	close(s->lfd);
	close(s->stopfd[0]);
	close(s->stopfd[1]);
	pthread_attr_destroy(&s->attr);
	pthread_cond_destroy(&s->turn);
	pthread_cond_destroy(&s->gone);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

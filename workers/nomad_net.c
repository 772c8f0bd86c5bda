/* The sbx CNI network on a Nomad client: the node agent's side of sbx-cni
 * (nomad_net.h, doc/nomad.md "The CNI network").
 *
 * One request per connection: sbx-cni writes a JSON object and shuts its
 * side down; the child that serves it answers one JSON object and exits.
 * Only root may ask (the socket is 0600 and the peer's uid is checked):
 * whoever may ask can put a veth into any network namespace it names. */
#include "config.h"
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "cleanup.h"
#include "cni.h"
#include "id.h"
#include "json.h"
#include "log.h"
#include "net.h"
#include "nomad_net.h"

#define REQ_MAX 65536

struct nomad_net {
	const struct sandbox_node_cfg *c;
	int fd;
	int ep;
};

static void note_path(const struct sandbox_node_cfg *c, const char *id, char *out, size_t sz)
{
	snprintf(out, sz, "%.300s/nomad-net/%.24s", c->state_dir, id);
}

/* The note: the allocation id, and on a second line "uplink NAME", the
 * uplink namespace the network was made in (NAME empty: the host's).
 * -1: no note; 1: it names the uplink; 0: it does not (an older agent's:
 * the node's current uplink, then). */
static int note_read2(const struct sandbox_node_cfg *c, const char *id, char *alloc, size_t sz, char *up,
		      size_t upsz)
{
	char p[400], buf[512], *nl;
	cleanup_close int fd = -1;
	ssize_t n;

	note_path(c, id, p, sizeof(p));
	fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return -1;
	buf[n] = 0;
	nl = strchr(buf, '\n');
	if (nl)
		*nl++ = 0;
	snprintf(alloc, sz, "%s", buf);
	if (!nl || strncmp(nl, "uplink ", 7) != 0)
		return 0;
	nl += 7;
	nl[strcspn(nl, "\n")] = 0;
	if (up)
		snprintf(up, upsz, "%s", nl);
	return 1;
}

static int note_read(const struct sandbox_node_cfg *c, const char *id, char *alloc, size_t sz)
{
	return note_read2(c, id, alloc, sz, NULL, 0) < 0 ? -1 : 0;
}

bool nomad_net_wired(const struct sandbox_node_cfg *c, const char *id)
{
	char p[400];

	if (!sbx_id_valid(id) || !c->state_dir)
		return false;
	note_path(c, id, p, sizeof(p));
	return access(p, F_OK) == 0;
}

bool nomad_net_pending(const struct sandbox_node_cfg *c, const char *id, long long max_age_ms)
{
	char p[400];
	struct stat st;
	struct timespec now;

	if (!sbx_id_valid(id) || !c->state_dir || sandbox_adopted(c, id))
		return false;
	note_path(c, id, p, sizeof(p));
	if (lstat(p, &st) < 0)
		return false;
	clock_gettime(CLOCK_REALTIME, &now);
	return (long long)(now.tv_sec - st.st_mtim.tv_sec) * 1000 < max_age_ms;
}

int nomad_net_unwire(const struct sandbox_node_cfg *c, const char *id, sbx_err *err)
{
	char p[400], alloc[80], up[200];
	bool recorded;

	if (!sbx_id_valid(id))
		return sbx_err_set(err, 400, "sandbox", "bad sandbox id");
	/* in the uplink it was made in, as a local sandbox's (sandbox.c); the
	 * network first: the note is what finds it again after a failure */
	recorded = note_read2(c, id, alloc, sizeof(alloc), up, sizeof(up)) == 1;
	if (net_sandbox_destroy_made_in(c->net, id, recorded ? up : NULL, NULL, err) < 0)
		return -1;
	note_path(c, id, p, sizeof(p));
	if (unlink(p) < 0 && errno != ENOENT)
		return sbx_err_sys(err, "sandbox", "unlink %s", p);
	return 0;
}

int nomad_net_list(const struct sandbox_node_cfg *c, struct host_idset *s)
{
	char d[400];

	snprintf(d, sizeof(d), "%.300s/nomad-net", c->state_dir);
	return host_idset_add_dir(s, d);
}

/* v as text (malloc'd), v released; NULL when either fails. */
static char *dump_new(json_t *v)
{
	char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;

	json_decref(v);
	return s;
}

static char *fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *fail(int code, const char *fmt, ...)
{
	char msg[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return dump_new(json_pack("{s:b, s:i, s:s}", "ok", 0, "code", code, "msg", msg));
}

static char *wired(const struct sandbox_node_cfg *c, const struct net_sandbox *ns)
{
	const char *slash = strchr(c->net->subnet, '/');

	return dump_new(json_pack("{s:b, s:s, s:i, s:s, s:s}", "ok", 1, "ip", ns->ip, "prefix",
				  slash ? atoi(slash + 1) : 32, "gw", ns->gw, "mac", ns->mac));
}

static char *do_add(const struct sandbox_node_cfg *c, const char *id, const char *alloc, const char *netns,
		    const char *ifname)
{
	char p[400], d[400], have[80], line[400];
	struct net_sandbox ns;
	sbx_err err = SBX_ERR_INIT;
	cleanup_close int fd = -1;
	int n;

	/* gVisor takes eth0 (and the default route through it) */
	if (strcmp(ifname, "eth0") != 0)
		return fail(CNI_E_INVALID_ENV, "sbx: CNI_IFNAME must be eth0, not '%.20s'", ifname);
	snprintf(d, sizeof(d), "%.300s/sandboxes/%.24s", c->state_dir, id);
	if (access(d, F_OK) == 0)
		return fail(CNI_E_INVALID_ENV, "sbx: %s is a sandbox of this node agent's own", id);
	/* the intent first (a crash leaves a note the orphan pass finds);
	 * never wire one sandbox twice */
	snprintf(d, sizeof(d), "%.300s/nomad-net", c->state_dir);
	mkdir(c->state_dir, 0700);
	mkdir(d, 0700);
	note_path(c, id, p, sizeof(p));
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST) {
		if (note_read(c, id, have, sizeof(have)) == 0 && strcmp(have, alloc) != 0)
			return fail(CNI_E_TRY_LATER, "sbx: sandbox %s is wired for allocation %s", id, have);
		return fail(CNI_E_TRY_LATER, "sbx: sandbox %s is already wired (DEL it first)", id);
	}
	/* and the uplink it is made in: its unwiring goes there (nomad_net_unwire) */
	n = snprintf(line, sizeof(line), "%s\nuplink %s\n", alloc, c->net->uplink_netns ? c->net->uplink_netns : "");
	if (fd < 0 || n < 0 || (size_t)n >= sizeof(line) || write(fd, line, (size_t)n) != n) {
		int e = errno;
		if (fd >= 0)
			unlink(p);
		return fail(CNI_E_IO, "sbx: write %s: %s", p, strerror(e));
	}
	if (net_sandbox_create_in(c->net, id, netns, &ns, &err) < 0) {
		/* net_sandbox_create_in undid what it made */
		unlink(p);
		log_warnx("sandbox %s: wiring Nomad allocation %s's network: %s", id, alloc, err.msg);
		return fail(err.http == 400 ? CNI_E_INVALID_ENV : CNI_E_IO, "sbx: %s", err.msg);
	}
	log_info("sandbox %s: Nomad allocation %s wired at %s (netns %s)", id, alloc, ns.ip, netns);
	return wired(c, &ns);
}

static char *do_del(const struct sandbox_node_cfg *c, const char *id, const char *alloc)
{
	char have[80];
	sbx_err err = SBX_ERR_INIT;

	/* nothing of ours (gone already, or never made): DEL succeeds */
	if (note_read(c, id, have, sizeof(have)) < 0)
		return dump_new(json_pack("{s:b}", "ok", 1));
	/* a late DEL of an older allocation must not unwire the newer one */
	if (alloc[0] && strcmp(have, alloc) != 0)
		return dump_new(json_pack("{s:b}", "ok", 1));
	if (nomad_net_unwire(c, id, &err) < 0)
		return fail(CNI_E_IO, "sbx: %s", err.msg);
	log_info("sandbox %s: Nomad allocation %s unwired", id, have);
	return dump_new(json_pack("{s:b}", "ok", 1));
}

static char *do_check(const struct sandbox_node_cfg *c, const char *id, const char *alloc)
{
	char have[80], ip[16];
	sbx_err err = SBX_ERR_INIT;

	if (note_read(c, id, have, sizeof(have)) < 0 || (alloc[0] && strcmp(have, alloc) != 0))
		return fail(CNI_E_UNKNOWN_CONTAINER, "sbx: sandbox %s is not wired for allocation %s", id, alloc);
	if (net_sandbox_ip(c->net, id, ip, &err) < 0)
		return fail(CNI_E_UNKNOWN_CONTAINER, "sbx: %s", err.msg);
	return dump_new(json_pack("{s:b, s:s}", "ok", 1, "ip", ip));
}

char *nomad_net_serve(const struct sandbox_node_cfg *c, const char *request)
{
	cleanup_json json_t *req = json_loads(request, 0, NULL);
	struct cni_req r;
	char why[200];
	int code = cni_req_unpack(req, &r, why, sizeof(why));

	if (code)
		return fail(code, "%s", why);
	if (!strcmp(r.command, "ADD"))
		return do_add(c, r.sandbox_id, r.alloc_id, r.netns, r.ifname);
	if (!strcmp(r.command, "DEL"))
		return do_del(c, r.sandbox_id, r.alloc_id);
	return do_check(c, r.sandbox_id, r.alloc_id);
}

/* ---- the socket ------------------------------------------------------------ */

struct nomad_net *nomad_net_new(const struct sandbox_node_cfg *c, const char *path, int ep, sbx_err *err)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct epoll_event ev = { .events = EPOLLIN };
	struct nomad_net *nn;
	char dir[sizeof(a.sun_path)];
	cleanup_close int fd = -1;
	char *slash;

	if (!path || path[0] != '/' || strlen(path) >= sizeof(a.sun_path)) {
		sbx_err_set(err, 500, "sandbox_config", "nomad_cni_socket must be an absolute path of at most %zu bytes",
			    sizeof(a.sun_path) - 1);
		return NULL;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		mkdir(dir, 0755);
	}
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		sbx_err_sys(err, "nomad_net", "socket");
		return NULL;
	}
	/* a stale socket (an agent that died) is replaced */
	unlink(path);
	{
		mode_t old = umask(0177);
		int r = bind(fd, (struct sockaddr *)&a, sizeof(a));
		umask(old);
		if (r < 0 || chmod(path, 0600) < 0 || listen(fd, 64) < 0) {
			sbx_err_sys(err, "nomad_net", "listen on %s", path);
			return NULL;
		}
	}
	nn = calloc(1, sizeof(*nn));
	if (!nn) {
		sbx_err_sys(err, "nomad_net", "calloc");
		return NULL;
	}
	nn->c = c;
	nn->ep = ep;
	ev.data.ptr = nn;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		sbx_err_sys(err, "nomad_net", "epoll_ctl");
		free(nn);
		return NULL;
	}
	nn->fd = sbx_steal_fd(&fd);
	return nn;
}

void nomad_net_free(struct nomad_net *nn)
{
	if (!nn)
		return;
	epoll_ctl(nn->ep, EPOLL_CTL_DEL, nn->fd, NULL);
	close(nn->fd);
	free(nn);
}

bool nomad_net_owns(struct nomad_net *nn, void *ptr)
{
	return nn && ptr == nn;
}

/* In the child: one request read (bounded in size and time), served,
 * answered. */
static void serve_conn(const struct sandbox_node_cfg *c, int fd)
{
	struct timeval tv = { .tv_sec = 5 };
	struct ucred cr;
	socklen_t crl = sizeof(cr);
	char *req = malloc(REQ_MAX + 1), *rep = NULL;
	size_t len = 0;
	ssize_t n;

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (!req)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) < 0 || cr.uid != 0) {
		rep = fail(CNI_E_INVALID_ENV, "sbx: only root may wire sandboxes");
	} else {
		while (len < REQ_MAX && (n = read(fd, req + len, REQ_MAX - len)) > 0)
			len += (size_t)n;
		req[len] = 0;
		rep = nomad_net_serve(c, req);
	}
	if (rep) {
		size_t off = 0, rl = strlen(rep);
		while (off < rl && (n = write(fd, rep + off, rl - off)) > 0)
			off += (size_t)n;
	}
	free(rep);
	free(req);
}

void nomad_net_on_event(struct nomad_net *nn)
{
	for (;;) {
		int fd = accept4(nn->fd, NULL, NULL, SOCK_CLOEXEC);
		pid_t pid;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				log_warn("nomad network: accept");
			return;
		}
		pid = fork();
		if (pid < 0) {
			log_warn("nomad network: fork");
			close(fd);
			continue;
		}
		if (pid == 0) {
			sigset_t none;
			sigemptyset(&none);
			sigprocmask(SIG_SETMASK, &none, NULL);
			/* the agent's restart removes whatever a killed child left */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			signal(SIGTERM, SIG_DFL);
			signal(SIGINT, SIG_DFL);
			close(nn->fd);
			serve_conn(nn->c, fd);
			_exit(0);
		}
		close(fd);
	}
}

/* Per-sandbox network plumbing. See doc/network.md for the layout and why.
 *
 * `ip` and `nft` run through host.c's runner, in the uplink namespace when
 * one is configured. Their input and output are memfds: no pipe can fill up
 * or raise SIGPIPE, and nft's `-f -` (which reopens /dev/stdin) works. Rules
 * go to `nft -f -` as one transaction, so they apply entirely or not at all.
 *
 * A sandbox's rules are in place before the host side of its veth comes up,
 * and the map element that reserves its address is the first thing made and
 * the last removed, so the map is the authority on which addresses are taken. */
#include "config.h"
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cleanup.h"
#include "egress_policy.h"
#include "err.h"
#include "host.h"
#include "id.h"
#include "log.h"
#include "net.h"
#include "net_int.h"

/* A Linux bridge holds at most 1024 ports (BR_MAX_PORTS, port 0 reserved):
 * the subnet is cut into blocks of 1024 addresses, one bridge each (see
 * "bridges" below). */
#define BLOCK_BITS 10
#define BR_BLOCK_SIZE (1u << BLOCK_BITS)

/* ---- names and addresses ---------------------------------------------- */

/* Names are checked too because they go into nft rulesets and ip batches. */
static bool name_ok(const char *s, size_t max)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

int net_names(const char *sandbox_id, struct net_sandbox *out, sbx_err *err)
{
	if (!sbx_id_valid(sandbox_id))
		return sbx_err_set(err, 400, "bad_id", "not a sandbox id: '%.40s'", sandbox_id ? sandbox_id : "");
	memset(out, 0, sizeof(*out));
	snprintf(out->netns, sizeof(out->netns), "sbx-%s", sandbox_id);
	snprintf(out->veth_host, sizeof(out->veth_host), "sbxh%.9s", sandbox_id);
	/* Locally administered unicast, from the id: destroy finds the
	 * neighbour entry by it even when nothing else is left. */
	snprintf(out->mac, sizeof(out->mac), "02:%.2s:%.2s:%.2s:%.2s:%.2s", sandbox_id,
		 sandbox_id + 2, sandbox_id + 4, sandbox_id + 6, sandbox_id + 8);
	return 0;
}

void ip4_str(uint32_t a, char out[16])
{
	struct in_addr in = { htonl(a) };
	inet_ntop(AF_INET, &in, out, 16);
}

static int parse_subnet(const char *s, struct subnet *sn, sbx_err *err)
{
	char addr[32];
	const char *slash = s ? strchr(s, '/') : NULL;
	struct in_addr in;
	char *end;
	long len;

	if (!slash || (size_t)(slash - s) >= sizeof(addr))
		return sbx_err_set(err, 500, "net_config", "net subnet '%s' is not A.B.C.D/LEN", s ? s : "");
	memcpy(addr, s, (size_t)(slash - s));
	addr[slash - s] = 0;
	errno = 0;
	len = strtol(slash + 1, &end, 10);
	if (inet_pton(AF_INET, addr, &in) != 1 || *end || end == slash + 1 || len < 8 || len > 28)
		return sbx_err_set(err, 500, "net_config",
				   "net subnet '%s' is not A.B.C.D/LEN with LEN 8..28", s);
	sn->len = (int)len;
	sn->mask = len == 0 ? 0 : 0xffffffffu << (32 - len);
	sn->net = ntohl(in.s_addr) & sn->mask;
	ip4_str(sn->net + 1, sn->gw);
	return 0;
}

int check_config(const struct net_config *c, struct subnet *sn, sbx_err *err)
{
	if (!name_ok(c->bridge, 15))
		return sbx_err_set(err, 500, "net_config", "bad bridge name '%s'", c->bridge ? c->bridge : "");
	if (uplink(c) && !name_ok(c->uplink_netns, 200))
		return sbx_err_set(err, 500, "net_config", "bad uplink netns name '%s'", c->uplink_netns);
	if (uplink(c)) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), NETNS_DIR "/%s", c->uplink_netns);
		if (access(p, F_OK) < 0)
			return sbx_err_sys(err, "net_config", "uplink netns %s", p);
	}
	if (c->internal_ranges) {
		/* they go into a ruleset: each must be an address or CIDR */
		char r[64];
		const char *p = c->internal_ranges;
		while (*p) {
			size_t n = strcspn(p, ", ");
			struct sbx_egress_entry e;
			if (n && (n >= sizeof(r) || (memcpy(r, p, n), r[n] = 0,
						      sbx_egress_entry_parse(r, &e, err) < 0 || e.host[0] || e.port)))
				return sbx_err_set(err, 500, "net_config", "internal range '%.*s' is not A.B.C.D[/LEN]",
						   (int)(n > 60 ? 60 : n), p);
			p += n;
			p += strspn(p, ", ");
		}
	}
	return parse_subnet(c->subnet, sn, err);
}

/* One lock per bridge: two creates on this node cannot pick one address. */
static int net_lock(const struct net_config *c, sbx_err *err)
{
	char p[PATH_MAX];
	int fd;

	snprintf(p, sizeof(p), LOCK_DIR "/sbx-net.%s.%s.lock", uplink(c) ? c->uplink_netns : "host",
		 c->bridge);
	(void)mkdir(LOCK_DIR, 0755);
	fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return sbx_err_sys(err, "net", "open %s", p);
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			int e = errno;
			close(fd);
			errno = e;
			return sbx_err_sys(err, "net", "flock %s", p);
		}
	}
	return fd;
}

/* ---- bridges ------------------------------------------------------------ */

/* Block 0 of the subnet (the gateway's) is net_bridge's; block k > 0 is its
 * overflow bridge "<net_bridge>-k", made when the block's first sandbox
 * comes (ensure_bridge) and kept like net_bridge. Every bridge holds the
 * gateway's address (/32 on the overflow ones, whose block the node routes
 * to them by a /22) and the same fixed MAC, so a sandbox sees one gateway
 * and one /LEN subnet wherever it is, and the node's forwarder on the
 * gateway answers on all of them. */
static int bridge_name(const struct net_config *c, unsigned k, char out[16], sbx_err *err)
{
	int n = k ? snprintf(out, 16, "%s-%u", c->bridge, k) : snprintf(out, 16, "%s", c->bridge);

	if (n < 0 || n >= 16)
		return sbx_err_set(err, 503, "no_address",
				   "no bridge for sandbox %u and on: '%s-%u' is longer than an interface name (a shorter "
				   "net_bridge gives room)", k * BR_BLOCK_SIZE, c->bridge, k);
	return 0;
}

/* Is name net_bridge or one of its overflow bridges ("<net_bridge>-<digits>")? */
static bool our_bridge(const struct net_config *c, const char *name)
{
	size_t l = strlen(c->bridge);

	if (strncmp(name, c->bridge, l) != 0)
		return false;
	if (!name[l])
		return true;
	return name[l] == '-' && name[l + 1] && strspn(name + l + 1, "0123456789") == strlen(name + l + 1);
}

int net_bridges(const struct net_config *c, void (*fn)(const char *name, void *), void *arg, sbx_err *err)
{
	static const char *const argv[] = { "ip", "-j", "link", "show", "type", "bridge", NULL };
	cleanup_host_out struct host_out o = { 0 };
	json_error_t jerr;
	json_t *v, *e;
	size_t i;

	if (net_run_ok(uplink(c), argv, NULL, &o, err) < 0)
		return -1;
	v = json_loads(o.out, 0, &jerr);
	json_array_foreach(v, i, e) {
		const char *name = json_string_value(json_object_get(e, "ifname"));
		if (name && our_bridge(c, name))
			fn(name, arg);
	}
	json_decref(v);
	return 0;
}

/* 1: name is a bridge, 0: there is no such link, < 0: error (also when the
 * name is taken by something else). */
int bridge_exists(const struct net_config *c, const char *name, sbx_err *err)
{
	const char *argv[] = { "ip", "-j", "-d", "link", "show", "dev", name, NULL };
	cleanup_host_out struct host_out o = { 0 };
	json_error_t jerr;
	json_t *v;
	const char *kind;
	bool is_bridge;

	if (net_run(uplink(c), argv, NULL, &o, err) < 0)
		return -1;
	if (o.status != 0)
		return 0;
	v = json_loads(o.out, 0, &jerr);
	kind = json_string_value(json_object_get(json_object_get(json_array_get(v, 0), "linkinfo"), "info_kind"));
	is_bridge = kind && strcmp(kind, "bridge") == 0;
	json_decref(v);
	if (!is_bridge)
		return sbx_err_set(err, 500, "net", "%s exists and is not a bridge", name);
	return 1;
}

/* The overflow bridge of block k, ready for ports (under the net lock).
 * It joins the bridges set before it exists, so the base chains judge
 * every port it ever has; the rest is idempotent and redone each time, so
 * a half-made bridge (a crash between) is completed. */
static int ensure_bridge(const struct net_config *c, const struct subnet *sn, unsigned k, const char *name,
			 sbx_err *err)
{
	cleanup_buf struct buf b = { 0 };
	char block[16];
	int have;

	if ((have = bridge_exists(c, name, err)) < 0)
		return -1;
	bprintf(&b, "add element " TABLE " " BR_SET " { \"%s\" }\n", name);
	if (b.oom || net_nft_apply(c, b.s, err) < 0)
		return sbx_err_ctx(err, "bridge %s", name);
	b.len = 0;
	ip4_str(sn->net + k * BR_BLOCK_SIZE, block);
	if (!have)
		bprintf(&b, "link add %s type bridge stp_state 0\n", name);
	bprintf(&b,
		"link set dev %s address " BRIDGE_MAC " addrgenmode none\n"
		"address replace %s/32 dev %s\n"
		"link set dev %s up\n"
		"route replace %s/%d dev %s src %s\n",
		name, sn->gw, name, name, block, 32 - BLOCK_BITS, name, sn->gw);
	if (b.oom)
		return sbx_err_set(err, 500, "net", "out of memory");
	if (ip_batch(uplink(c), b.s, err) < 0)
		return sbx_err_ctx(err, "bridge %s", name);
	if (!have)
		log_info("network: bridge %s made for sandboxes %s/%d", name, block, 32 - BLOCK_BITS);
	return 0;
}

/* ---- sandboxes --------------------------------------------------------- */

struct used {
	uint32_t *a;
	size_t n, cap;
	bool oom;
};

static void add_used(const char *ip, const char *target, void *arg)
{
	struct used *u = arg;
	struct in_addr in;

	(void)target;
	if (inet_pton(AF_INET, ip, &in) != 1 || u->oom)
		return;
	if (u->n == u->cap) {
		size_t ncap = u->cap ? u->cap * 2 : 64;
		uint32_t *p = realloc(u->a, ncap * sizeof(*p));
		if (!p) {
			u->oom = true;
			return;
		}
		u->a = p;
		u->cap = ncap;
	}
	u->a[u->n++] = ntohl(in.s_addr);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* One map or set of the table (`nft -j list map|set`): a fraction of the
 * whole table once a thousand sandboxes have their chains. missing_ok: no
 * table (or no such set) is an empty answer (*root NULL), not an error. */
static int list_json(const struct net_config *c, const char *what, const char *name, bool missing_ok, json_t **root,
		     sbx_err *err)
{
	cleanup_host_out struct host_out o = { 0 };
	json_error_t jerr;
	char line[300], cmd[200];

	*root = NULL;
	snprintf(cmd, sizeof(cmd), "list %s inet sbx %s", what, name);
	if (net_nft(uplink(c), cmd, true, &o, err) < 0)
		return -1;
	if (o.status != 0) {
		/* no table (an uplink gone, a node never set up): nothing is in it */
		if (missing_ok && (!o.errs || strstr(o.errs, "No such file or directory")))
			return 0;
		return sbx_err_set(err, 500, "net", "nft -j list %s %s: %s", what, name,
				   o.errs && *o.errs ? first_line(o.errs, line, sizeof(line))
						     : "no table: node network setup has not run");
	}
	*root = json_loads(o.out, 0, &jerr);
	if (!*root)
		return sbx_err_set(err, 500, "net", "nft -j list %s %s: bad JSON: %s", what, name, jerr.text);
	return 0;
}

static int map_json(const struct net_config *c, bool missing_ok, json_t **root, sbx_err *err)
{
	return list_json(c, "map", SB_MAP, missing_ok, root, err);
}

/* Is ip an element of the named set (in a listing)? */
static bool set_has(json_t *root, const char *set, const char *ip)
{
	json_t *e;
	size_t j;

	json_array_foreach(nft_elems(root, "set", set), j, e)
		if (json_is_string(e) && !strcmp(json_string_value(e), ip))
			return true;
	return false;
}

/* The lowest address of the subnet that no map element holds (the map
 * element is made first and removed last, so it covers half-made sandboxes),
 * skipping the first two of each bridge's block (block 0: the network and
 * the gateway; the others alike, so no bridge has more than 1022 ports). */
static int alloc_ip(const struct net_config *c, const struct subnet *sn, char out[16], uint32_t *addr, sbx_err *err)
{
	json_t *root = NULL;
	struct used u = { 0 };
	uint32_t cand = sn->net + 2, last = (sn->net | ~sn->mask) - 1;
	size_t i = 0;

	if (map_json(c, false, &root, err) < 0)
		return -1;
	each_element(root, add_used, &u);
	json_decref(root);
	if (u.oom) {
		free(u.a);
		return sbx_err_set(err, 500, "net", "out of memory");
	}
	if (u.n)
		qsort(u.a, u.n, sizeof(*u.a), cmp_u32);
	while (cand <= last) {
		if (((cand - sn->net) & (BR_BLOCK_SIZE - 1)) < 2) {
			cand++;
			continue;
		}
		while (i < u.n && u.a[i] < cand)
			i++;
		if (i < u.n && u.a[i] == cand) {
			cand++;
			continue;
		}
		break;
	}
	free(u.a);
	if (cand > last)
		return sbx_err_set(err, 503, "no_address", "no free sandbox address in %s", c->subnet);
	ip4_str(cand, out);
	*addr = cand;
	return 0;
}

static bool netns_exists(const char *name)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), NETNS_DIR "/%s", name);
	return access(p, F_OK) == 0;
}

/* What of the table belongs to one sandbox (teardown). */
struct owned {
	char in[64], allow[64], ip[16];
	struct buf *b;
};

static void owned_element(const char *ip, const char *target, void *arg)
{
	struct owned *o = arg;

	if (strcmp(target, o->allow) == 0) {
		bprintf(o->b, "delete element " TABLE " " SB_MAP " { %s }\n", ip);
		snprintf(o->ip, sizeof(o->ip), "%s", ip);
	}
}

/* What teardown removes: destroy takes all; a failed create only what it made. */
#define T_VETH 0x1u
#define T_NETNS 0x2u
#define T_NEIGH 0x4u
#define T_ALLOW 0x8u /* the map element and allow_<id> */
#define T_IN 0x10u   /* in_<id> */
#define T_ALL 0x1fu

/* Removes whichever of the `what` parts of a sandbox's plumbing exist; every
 * step is tried, err keeps the first failure. */
static int teardown(const struct net_config *c, const char *id, const struct net_sandbox *ns,
		    unsigned what, sbx_err *err)
{
	cleanup_host_out struct host_out o = { 0 };
	cleanup_buf struct buf b = { 0 };
	int rc = 0;
	json_t *root = NULL;
	sbx_err later = SBX_ERR_INIT;

	/* Every step is tried; err keeps the first failure. */
#define STEP_ERR (rc < 0 ? &later : err)

	/* The host side of the veth first: traffic stops before rules go. */
	if ((what & T_VETH) && link_del(uplink(c), ns->veth_host, STEP_ERR) < 0)
		rc = -1;
	if ((what & T_NETNS) && netns_del(ns->netns, STEP_ERR) < 0)
		rc = -1;
	/* The permanent neighbour entry, found by the MAC derived from the id. */
	if (what & T_NEIGH) {
		/* on whichever of our bridges it is (the address may be gone) */
		const char *argv[] = { "ip", "-j", "neigh", "show", NULL };
		if (net_run(uplink(c), argv, NULL, &o, STEP_ERR) < 0) {
			rc = -1;
		} else if (o.status == 0) {
			json_error_t jerr;
			json_t *v = json_loads(o.out, 0, &jerr), *e;
			size_t i;
			json_array_foreach(v, i, e) {
				const char *dst = json_string_value(json_object_get(e, "dst"));
				const char *ll = json_string_value(json_object_get(e, "lladdr"));
				const char *dev = json_string_value(json_object_get(e, "dev"));
				if (dst && ll && dev && strcasecmp(ll, ns->mac) == 0 && our_bridge(c, dev))
					bprintf(&b, "neigh del %s dev %s\n", dst, dev);
			}
			json_decref(v);
		}
		host_out_free(&o);
		if (b.len && !b.oom && ip_batch(uplink(c), b.s, STEP_ERR) < 0)
			rc = -1;
		b.len = 0;
	}
	/* nft: the map element pointing at allow_<id>, then both chains. */
	if (!(what & (T_ALLOW | T_IN)))
		return rc;
	/* The map and the NAT set are listed, not the whole table (~2 KB a
	 * sandbox: with a thousand, listing it cost more than the rest of a
	 * destroy); the chains are made if missing and removed in the same
	 * transaction, which removes them whether or not they were there. */
	if (map_json(c, true, &root, STEP_ERR) < 0)
		return -1;
	if (root) {
		struct owned own = { .b = &b };
		snprintf(own.in, sizeof(own.in), CHAIN_IN "%s", id);
		snprintf(own.allow, sizeof(own.allow), CHAIN_ALLOW "%s", id);
		if (what & T_ALLOW)
			each_element(root, owned_element, &own);
		json_decref(root);
		/* its NAT membership (egress.c), when it has one (the set may be
		 * gone: then there is nothing to remove, and nothing may fail) */
		if (own.ip[0]) {
			json_t *nat = NULL;
			if (list_json(c, "set", "nat4", true, &nat, STEP_ERR) < 0)
				return -1;
			if (nat && set_has(nat, "nat4", own.ip))
				bprintf(&b, "delete element " TABLE " nat4 { %s }\n", own.ip);
			json_decref(nat);
		}
		if (what & T_IN)
			bprintf(&b, "add chain " TABLE " %s\nflush chain " TABLE " %s\ndelete chain " TABLE " %s\n",
				own.in, own.in, own.in);
		if (what & T_ALLOW)
			bprintf(&b, "add chain " TABLE " %s\nflush chain " TABLE " %s\ndelete chain " TABLE " %s\n",
				own.allow, own.allow, own.allow);
		if (b.oom)
			return sbx_err_set(STEP_ERR, 500, "net", "out of memory");
		if (b.len && net_nft_apply(c, b.s, STEP_ERR) < 0)
			rc = -1;
	}
	return rc;
#undef STEP_ERR
}

/* The network namespace at path (a CNI runtime's, e.g. /proc/PID/ns/net)
 * named NETNS_DIR/name by a bind mount, as `ip netns attach` does, so the
 * rest is the same as for a namespace of ours (`ip netns del` undoes it; the
 * namespace itself lives on with whoever holds it). Never the agent's own
 * namespace or the uplink's: eth0 there would put a sandbox on the host. */
static int netns_attach(const struct net_config *c, const char *name, const char *path, sbx_err *err)
{
	cleanup_close int fd = -1, tfd = -1;
	char target[PATH_MAX], src[64], up[PATH_MAX];
	struct statfs sf;
	struct stat st, own;

	if (!path || path[0] != '/' || strlen(path) >= PATH_MAX - 1)
		return sbx_err_set(err, 400, "net", "the network namespace path must be absolute");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, "net", "open network namespace %s", path);
	if (fstatfs(fd, &sf) < 0 || sf.f_type != NSFS_MAGIC || fstat(fd, &st) < 0)
		return sbx_err_set(err, 400, "net", "%s is not a network namespace", path);
	snprintf(up, sizeof(up), NETNS_DIR "/%s", uplink(c) ? c->uplink_netns : "");
	if ((stat("/proc/self/ns/net", &own) == 0 && own.st_ino == st.st_ino && own.st_dev == st.st_dev) ||
	    (uplink(c) && stat(up, &own) == 0 && own.st_ino == st.st_ino && own.st_dev == st.st_dev))
		return sbx_err_set(err, 400, "net", "%s is the node's own network namespace", path);
	(void)mkdir(NETNS_DIR, 0755);
	snprintf(target, sizeof(target), NETNS_DIR "/%s", name);
	tfd = open(target, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
	if (tfd < 0)
		return sbx_err_sys(err, "net", "create %s", target);
	snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
	if (mount(src, target, "none", MS_BIND, NULL) < 0) {
		int e = errno;
		unlink(target);
		errno = e;
		return sbx_err_sys(err, "net", "bind %s at %s", path, target);
	}
	return 0;
}

int net_sandbox_create(const struct net_config *c, const char *sandbox_id, struct net_sandbox *out,
		       sbx_err *err)
{
	return net_sandbox_create_in(c, sandbox_id, NULL, out, err);
}

static void *net_async_run(void *arg)
{
	struct net_async *a = arg;

	a->rc = net_sandbox_create(a->c, a->sandbox_id, &a->ns, &a->err);
	return NULL;
}

void net_sandbox_create_begin(struct net_async *a, const struct net_config *c, const char *sandbox_id)
{
	a->c = c;
	a->sandbox_id = sandbox_id;
	a->running = pthread_create(&a->th, NULL, net_async_run, a) == 0;
	if (!a->running)
		net_async_run(a);
}

int net_sandbox_create_end(struct net_async *a, struct net_sandbox *out, sbx_err *err)
{
	if (a->running) {
		pthread_join(a->th, NULL);
		a->running = false;
	}
	if (a->rc < 0 && err)
		*err = a->err;
	if (a->rc == 0 && out)
		*out = a->ns;
	return a->rc;
}

int net_sandbox_create_in(const struct net_config *c, const char *sandbox_id, const char *netns_path,
			  struct net_sandbox *out, sbx_err *err)
{
	cleanup_close int lock = -1;
	cleanup_buf struct buf b = { 0 };
	struct net_sandbox ns;
	struct subnet sn;
	char netstr[16];
	sbx_err undo_err = SBX_ERR_INIT;
	unsigned made = 0; /* what to undo: never what was there before */
	uint32_t addr = 0;
	unsigned block;
	char br[16];

	if (check_config(c, &sn, err) < 0 || net_names(sandbox_id, &ns, err) < 0)
		return sbx_err_ctx(err, "sandbox network");
	lock = net_lock(c, err);
	if (lock < 0)
		return sbx_err_ctx(err, "sandbox network");
	if (alloc_ip(c, &sn, ns.ip, &addr, err) < 0)
		goto fail;
	/* its block's bridge, made before anything of the sandbox exists */
	block = (addr - sn.net) >> BLOCK_BITS;
	if (bridge_name(c, block, br, err) < 0 || (block && ensure_bridge(c, &sn, block, br, err) < 0))
		goto fail;

	/* 1. Reserve the address: the map element and the (empty) allow chain.
	 * `create` fails on a leftover of the same id instead of adopting it. */
	bprintf(&b,
		"create chain " TABLE " " CHAIN_ALLOW "%s\n"
		"add element " TABLE " " SB_MAP " { %s : jump " CHAIN_ALLOW "%s }\n",
		sandbox_id, ns.ip, sandbox_id);
	if (b.oom || net_nft_apply(c, b.s, err) < 0)
		goto fail;
	made |= T_ALLOW;

	/* 2. The namespace (fails if it exists: never adopt one), or the
	 * CNI runtime's, named like ours. */
	if (netns_path) {
		if (netns_attach(c, ns.netns, netns_path, err) < 0)
			goto fail;
		made |= T_NETNS;
	} else {
		if (netns_add(ns.netns, err) < 0)
			goto fail;
		made |= T_NETNS;
	}
	/* 3. The veth pair, its sandbox end moved into the namespace as eth0. */
	if (link_veth_add(uplink(c), ns.veth_host, "eth0", ns.mac, ns.netns, err) < 0) {
		sbx_err_ctx(err, "veth %s", ns.veth_host);
		goto fail;
	}
	made |= T_VETH;
	/* 4. Host side, still down: named for net_list, no IPv6, on the bridge,
	 * isolated from the other ports, and the node's ARP entry for the
	 * sandbox pinned so no sandbox can claim another's address. */
	if (link_bridge_port(uplink(c), ns.veth_host, ns.netns, br, err) < 0)
		goto fail;
	made |= T_NEIGH; /* the entry carries this id's MAC: removing it is safe */
	if (net_neigh(uplink(c), br, ns.ip, ns.mac, err) < 0)
		goto fail;

	ip4_str(sn.net, netstr);
	/* 5. The veth's ingress chain, default drop, before the veth is up:
	 * only IPv4 from the sandbox's own MAC and address, never to the
	 * subnet (other sandboxes) except the gateway; what passes still
	 * meets input/forward, where the default is drop too. */
	b.len = 0;
	bprintf(&b,
		"create chain " TABLE " " CHAIN_IN "%s { type filter hook ingress device \"%s\" priority -500; policy drop; }\n"
		"add rule " TABLE " " CHAIN_IN "%s ether saddr != %s counter drop\n"
		"add rule " TABLE " " CHAIN_IN "%s meta nfproto != ipv4 counter drop\n"
		"add rule " TABLE " " CHAIN_IN "%s ip saddr != %s counter drop\n"
		"add rule " TABLE " " CHAIN_IN "%s ip daddr %s/%d ip daddr != %s counter drop\n"
		"add rule " TABLE " " CHAIN_IN "%s accept\n",
		sandbox_id, ns.veth_host, sandbox_id, ns.mac, sandbox_id, sandbox_id, ns.ip, sandbox_id,
		netstr, sn.len, sn.gw, sandbox_id);
	if (b.oom || net_nft_apply(c, b.s, err) < 0)
		goto fail;
	made |= T_IN;

	/* 6. Inside: lo and eth0 up, the address, the default route. gVisor
	 * copies all of this when the sandbox starts. */
	if (link_inside(ns.netns, "eth0", ns.ip, sn.len, sn.gw, err) < 0)
		goto fail;

	/* 7. Last: the host side up. */
	if (link_up(uplink(c), ns.veth_host, err) < 0)
		goto fail;
	snprintf(ns.gw, sizeof(ns.gw), "%s", sn.gw);
	*out = ns;
	return 0;

fail:
	if (made && teardown(c, sandbox_id, &ns, made, &undo_err) < 0)
		log_warnx("sandbox %s: undoing a failed network create: %s", sandbox_id, undo_err.msg);
	if (b.oom)
		sbx_err_set(err, 500, "net", "out of memory");
	return sbx_err_ctx(err, "sandbox network");
}

/* Destroy with the address the sandbox was given (net_sandbox_destroy_made_in's
 * hint): nothing is listed, so its cost does not grow with the node's
 * sandboxes (the map, the NAT set and the neighbours were listed for each
 * destroy: at 300 sandboxes the network took 128 ms of a destroy, p50).
 * One transaction proves the address is this sandbox's or no one's (adding
 * its element with another verdict fails with EEXIST, and the whole
 * transaction with it) and removes the element, the NAT membership and both
 * chains; then the neighbour entry of that address goes. Under the lock.
 * Returns -1, having removed nothing of the table, when the address is
 * another's or the transaction fails: the caller then does the listing
 * teardown. */
static int teardown_at(const struct net_config *c, const char *id, const struct subnet *sn, const char *ip,
		       sbx_err *err)
{
	cleanup_buf struct buf b = { 0 };
	struct in_addr a;
	uint32_t addr;
	char br[16];

	if (inet_pton(AF_INET, ip, &a) != 1)
		return sbx_err_set(err, 500, "net", "recorded address %.20s is not one", ip);
	addr = ntohl(a.s_addr);
	if ((addr & sn->mask) != sn->net)
		return sbx_err_set(err, 500, "net", "recorded address %s is not in %s", ip, c->subnet);
	if (bridge_name(c, (addr - sn->net) >> BLOCK_BITS, br, err) < 0)
		return -1;
	bprintf(&b,
		"add chain " TABLE " " CHAIN_ALLOW "%s\n"
		"add chain " TABLE " " CHAIN_IN "%s\n"
		"add element " TABLE " " SB_MAP " { %s : jump " CHAIN_ALLOW "%s }\n"
		"delete element " TABLE " " SB_MAP " { %s }\n"
		"add element " TABLE " nat4 { %s }\n"
		"delete element " TABLE " nat4 { %s }\n"
		"flush chain " TABLE " " CHAIN_IN "%s\ndelete chain " TABLE " " CHAIN_IN "%s\n"
		"flush chain " TABLE " " CHAIN_ALLOW "%s\ndelete chain " TABLE " " CHAIN_ALLOW "%s\n",
		id, id, ip, id, ip, ip, ip, id, id, id, id);
	if (b.oom)
		return sbx_err_set(err, 500, "net", "out of memory");
	if (net_nft_apply(c, b.s, err) < 0)
		return -1;
	/* the address is no one else's now: its pinned entry was ours */
	return net_neigh(uplink(c), br, ip, NULL, err);
}

static int destroy_at(const struct net_config *c, const char *sandbox_id, const char *ip, sbx_err *err)
{
	cleanup_close int lock = -1;
	struct net_sandbox ns;
	struct subnet sn;

	if (net_names(sandbox_id, &ns, err) < 0)
		return sbx_err_ctx(err, "sandbox network destroy");
	/* An uplink namespace that is gone took the bridge, the veth's host
	 * end, the neighbour entry and the table with it: only the sandbox's
	 * own namespace is left. */
	if (uplink(c) && name_ok(c->uplink_netns, 200) && !netns_exists(c->uplink_netns))
		return teardown(c, sandbox_id, &ns, T_NETNS, err) < 0 ? sbx_err_ctx(err, "sandbox network destroy") : 0;
	if (check_config(c, &sn, err) < 0)
		return sbx_err_ctx(err, "sandbox network destroy");
	/* The sandbox's veth and namespace before the lock: they are its own
	 * (named by its id), and their removal waits out RCU grace periods in
	 * the kernel (~10 ms each on 2 vCPUs), which under the lock made a
	 * thousand destroys wait for each other. The listing teardown below
	 * finds them gone. */
	if (ip && *ip && teardown(c, sandbox_id, &ns, T_VETH | T_NETNS, err) < 0)
		return sbx_err_ctx(err, "sandbox network destroy");
	/* Under the lock: the address is free once its element goes. */
	lock = net_lock(c, err);
	if (lock < 0)
		return sbx_err_ctx(err, "sandbox network destroy");
	if (ip && *ip) {
		sbx_err e2 = SBX_ERR_INIT;
		if (teardown_at(c, sandbox_id, &sn, ip, &e2) == 0)
			return 0;
		log_info("sandbox %s: network by its address %s: %s; listing instead", sandbox_id, ip, e2.msg);
	}
	if (teardown(c, sandbox_id, &ns, T_ALL, err) < 0)
		return sbx_err_ctx(err, "sandbox network destroy");
	return 0;
}

int net_sandbox_destroy(const struct net_config *c, const char *sandbox_id, sbx_err *err)
{
	return destroy_at(c, sandbox_id, NULL, err);
}

int net_sandbox_destroy_made_in(const struct net_config *c, const char *sandbox_id, const char *made_in,
				const char *ip, sbx_err *err)
{
	struct net_config nc = *c;

	if (made_in && strcmp(made_in, nc.uplink_netns ? nc.uplink_netns : "")) {
		log_info("sandbox %s: its network was made in uplink '%s' (the node's is '%s' now)", sandbox_id,
			 made_in, nc.uplink_netns ? nc.uplink_netns : "");
		nc.uplink_netns = made_in;
	}
	return destroy_at(&nc, sandbox_id, ip, err);
}

struct find_ip {
	char target[64];
	char *out;
	bool found;
};

static void find_ip_element(const char *ip, const char *target, void *arg)
{
	struct find_ip *f = arg;

	if (!strcmp(target, f->target) && strlen(ip) < 16) {
		snprintf(f->out, 16, "%s", ip);
		f->found = true;
	}
}

int net_sandbox_ip(const struct net_config *c, const char *sandbox_id, char out[16], sbx_err *err)
{
	struct find_ip f = { .out = out };
	json_t *root = NULL;

	if (!sbx_id_valid(sandbox_id))
		return sbx_err_set(err, 400, "bad_id", "not a sandbox id");
	snprintf(f.target, sizeof(f.target), CHAIN_ALLOW "%s", sandbox_id);
	if (map_json(c, true, &root, err) < 0)
		return -1;
	if (root)
		each_element(root, find_ip_element, &f);
	json_decref(root);
	if (!f.found)
		return sbx_err_set(err, 404, "no_sandbox_net", "sandbox %s has no network on this node", sandbox_id);
	return 0;
}

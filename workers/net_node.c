/* The node's network as a whole (doc/network.md): the nft
 * table with its base chains, sets and the sandboxes' verdict map, read
 * back as JSON, and net_node_setup, which makes the bridge and the table
 * once per node. A sandbox's own part (its netns, veth, address, chains)
 * is in net.c. */
#include "config.h"
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "cleanup.h"
#include "err.h"
#include "host.h"
#include "log.h"
#include "net.h"
#include "net_int.h"

static void bridge_element(const char *name, void *arg)
{
	bprintf(arg, "add element " TABLE " " BR_SET " { \"%s\" }\n", name);
}

/* ---- the table --------------------------------------------------------- */

/* `nft -j CMD` in the uplink; failing is an error naming it. */
static int nft_list(const struct net_config *c, const char *cmd, struct host_out *o, sbx_err *err)
{
	char line[300];

	if (net_nft(uplink(c), cmd, true, o, err) < 0)
		return -1;
	if (o->status != 0)
		return sbx_err_set(err, 500, "net", "nft -j %s failed: %s", cmd, first_line(o->errs, line, sizeof(line)));
	return 0;
}

/* The table as JSON (NULL in *root when there is no table). */
int table_json(const struct net_config *c, json_t **root, sbx_err *err)
{
	cleanup_host_out struct host_out o = { 0 };
	json_error_t jerr;
	json_t *v, *item;
	size_t i;
	bool found = false;

	*root = NULL;
	if (nft_list(c, "list tables inet", &o, err) < 0)
		return -1;
	v = json_loads(o.out, 0, &jerr);
	json_array_foreach(json_object_get(v, "nftables"), i, item) {
		json_t *t = json_object_get(item, "table");
		if (t && json_is_string(json_object_get(t, "name")) &&
		    strcmp(json_string_value(json_object_get(t, "name")), "sbx") == 0)
			found = true;
	}
	json_decref(v);
	if (!found)
		return 0;
	host_out_free(&o);
	if (nft_list(c, "list table inet sbx", &o, err) < 0)
		return -1;
	*root = json_loads(o.out, 0, &jerr);
	if (!*root)
		return sbx_err_set(err, 500, "net", "nft -j list table: bad JSON: %s", jerr.text);
	return 0;
}

json_t *nft_elems(json_t *root, const char *kind, const char *name)
{
	json_t *item;
	size_t i;

	json_array_foreach(json_object_get(root, "nftables"), i, item) {
		json_t *o = json_object_get(item, kind);
		const char *n = json_string_value(json_object_get(o, "name"));
		if (o && n && !strcmp(n, name))
			return json_object_get(o, "elem");
	}
	return NULL;
}

/* Calls fn for each map element of the sandboxes map: (address, jump target). */
void each_element(json_t *root, void (*fn)(const char *ip, const char *target, void *), void *arg)
{
	json_t *e;
	size_t j;

	json_array_foreach(nft_elems(root, "map", SB_MAP), j, e) {
		const char *ip = json_string_value(json_array_get(e, 0));
		json_t *jump = json_object_get(json_array_get(e, 1), "jump");
		const char *target = json_string_value(json_object_get(jump, "target"));
		if (ip && target)
			fn(ip, target, arg);
	}
}

void each_chain(json_t *root, void (*fn)(const char *name, void *), void *arg)
{
	json_t *item;
	size_t i;

	json_array_foreach(json_object_get(root, "nftables"), i, item) {
		const char *name = json_string_value(json_object_get(json_object_get(item, "chain"), "name"));
		if (name)
			fn(name, arg);
	}
}

int net_node_setup(const struct net_config *c, sbx_err *err)
{
	cleanup_host_out struct host_out o = { 0 };
	cleanup_buf struct buf b = { 0 };
	char netstr[16];
	struct subnet sn;

	if (check_config(c, &sn, err) < 0)
		return -1;
	/* Forwarding, for open and restricted. Only in an uplink netns of our
	 * own: the host's is the operator's to set (doc/network.md); without
	 * it those sandboxes reach nothing, which is safe. */
	if (uplink(c)) {
		static const char *const fwd[] = { "sysctl", "-qw", "net.ipv4.ip_forward=1", NULL };
		if (net_run_ok(uplink(c), fwd, NULL, &o, err) < 0)
			return sbx_err_ctx(err, "node network setup");
		host_out_free(&o);
	} else {
		char v = '0';
		int fd = open("/proc/sys/net/ipv4/ip_forward", O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			if (read(fd, &v, 1) != 1)
				v = '0';
			close(fd);
		}
		if (v != '1')
			log_warnx("net.ipv4.ip_forward is 0 on this host: open and restricted sandboxes reach nothing "
				  "until an operator sets it to 1");
	}
	{
		int have = bridge_exists(c, c->bridge, err);
		if (have < 0)
			return sbx_err_ctx(err, "node network setup");
		if (!have)
			bprintf(&b, "link add %s type bridge stp_state 0\n", c->bridge);
	}
	/* No IPv6 on the bridge: sandboxes get none, and a link-local address
	 * would be one more way to reach the node. */
	bprintf(&b, "link set dev %s address " BRIDGE_MAC " addrgenmode none\n", c->bridge);
	bprintf(&b, "address replace %s/%d dev %s\n", sn.gw, sn.len, c->bridge);
	bprintf(&b, "link set dev %s up\n", c->bridge);
	if (b.oom)
		return sbx_err_set(err, 500, "net", "out of memory");
	if (ip_batch(uplink(c), b.s, err) < 0)
		return sbx_err_ctx(err, "node network setup: bridge %s", c->bridge);

	/* The table, rewritten atomically: base chains and fixed sets are
	 * flushed and refilled; the map and per-sandbox chains are kept. */
	b.len = 0;
	ip4_str(sn.net, netstr);
	bprintf(&b,
		"add table " TABLE "\n"
		"add set " TABLE " blocked4 { type ipv4_addr; flags interval; }\n"
		"add set " TABLE " blocked6 { type ipv6_addr; flags interval; }\n"
		"add map " TABLE " " SB_MAP " { type ipv4_addr : verdict; }\n"
		/* the sandboxes' bridges (net_bridge and its overflow bridges,
		 * ensure_bridge): never flushed, a bridge joins it before any
		 * port joins the bridge, so no sandbox's traffic is ever out of
		 * reach of the rules below */
		"add set " TABLE " " BR_SET " { type ifname; }\n"
		"add element " TABLE " " BR_SET " { \"%s\" }\n"
		/* sandboxes whose egress is open or restricted (egress.c): the
		 * only ones NATed out of the uplink */
		"add set " TABLE " nat4 { type ipv4_addr; }\n"
		/* the operator's internal ranges, blocked in every mode: a set
		 * of their own (they may overlap the subnet and each other) */
		"add set " TABLE " internal4 { type ipv4_addr; flags interval; auto-merge; }\n"
		"flush set " TABLE " internal4\n"
		"add chain " TABLE " postrouting { type nat hook postrouting priority srcnat; policy accept; }\n"
		"flush chain " TABLE " postrouting\n"
		"add chain " TABLE " node_allow\n"
		"flush chain " TABLE " node_allow\n"
		"add chain " TABLE " input { type filter hook input priority filter; policy accept; }\n"
		"add chain " TABLE " forward { type filter hook forward priority filter; policy accept; }\n"
		"flush chain " TABLE " input\n"
		"flush chain " TABLE " forward\n"
		"flush set " TABLE " blocked4\n"
		"flush set " TABLE " blocked6\n"
		/* Always blocked: link-local (cloud metadata) and the sandbox
		 * subnet itself (other sandboxes, the gateway). */
		"add element " TABLE " blocked4 { 0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16, 224.0.0.0/3, %s/%d }\n"
		"add element " TABLE " blocked6 { fe80::/10, fd00:ec2::254 }\n"
		/* A sandbox reaches the node itself only through node_allow
		 * (the DNS forwarder, below). */
		"add rule " TABLE " input iifname @" BR_SET " jump node_allow\n"
		"add rule " TABLE " input iifname @" BR_SET " counter drop\n"
		"add rule " TABLE " forward iifname @" BR_SET " ip daddr @blocked4 counter drop\n"
		"add rule " TABLE " forward iifname @" BR_SET " ip daddr @internal4 counter drop\n"
		"add rule " TABLE " forward iifname @" BR_SET " ip6 daddr @blocked6 counter drop\n"
		/* The source was checked on the veth (in_<id>), so it names the sandbox. */
		"add rule " TABLE " forward iifname @" BR_SET " meta nfproto ipv4 ip saddr vmap @" SB_MAP "\n"
		"add rule " TABLE " forward iifname @" BR_SET " counter drop\n"
		/* what comes back is judged by the sandbox's allow chain too
		 * (by the connection's original source: the sandbox), so a
		 * switch holds for open connections in both directions */
		"add rule " TABLE " forward oifname @" BR_SET " ct state established,related ct original ip saddr vmap @" SB_MAP "\n"
		"add rule " TABLE " forward oifname @" BR_SET " counter drop\n"
		"add rule " TABLE " postrouting ip saddr @nat4 oifname != @" BR_SET " masquerade\n"
		/* the DNS forwarder on the gateway (egress_node.c), for the
		 * sandboxes that may leave at all */
		"add rule " TABLE " node_allow ip saddr @nat4 ip daddr %s meta l4proto { udp, tcp } th dport 53 accept\n",
		c->bridge, netstr, sn.len, sn.gw);
	if (c->internal_ranges) {
		/* the operator's internal ranges: blocked in every mode */
		const char *p = c->internal_ranges;
		while (*p) {
			size_t n = strcspn(p, ", ");
			if (n)
				bprintf(&b, "add element " TABLE " internal4 { %.*s }\n", (int)n, p);
			p += n;
			p += strspn(p, ", ");
		}
	}
	/* overflow bridges of an earlier life, should the table be new */
	if (net_bridges(c, bridge_element, &b, err) < 0)
		return sbx_err_ctx(err, "node network setup");
	if (b.oom)
		return sbx_err_set(err, 500, "net", "out of memory");
	if (net_nft_apply(c, b.s, err) < 0)
		return sbx_err_ctx(err, "node network setup: nft table");
	return 0;
}


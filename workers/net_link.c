/* A sandbox's links, addresses, route, neighbour entry and namespace over
 * rtnetlink, in-process (net.c): each `ip` process cost ~8 ms of a create (a fork, an exec, the
 * dynamic loader) for a request the kernel answers in microseconds, and a
 * create ran five of them, a destroy two. The messages are those `ip`
 * sends for the same commands (iproute2's ip/iplink.c, ipaddress.c,
 * iproute.c, link_veth.c, iplink_bridge_slave.c); errors name the command
 * they stand for, so the logs read as before. */
#include "config.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cleanup.h"
#include "err.h"
#include "log.h"
#include "net.h"
#include "net_int.h"

/* ---- messages ----------------------------------------------------------- */

struct nlreq {
	struct nlmsghdr h;
	char room[1024];
};

static void nl_new(struct nlreq *r, int type, int flags, const void *hdr, size_t len)
{
	memset(r, 0, sizeof(*r));
	r->h.nlmsg_type = (uint16_t)type;
	r->h.nlmsg_flags = (uint16_t)(NLM_F_REQUEST | NLM_F_ACK | flags);
	r->h.nlmsg_len = NLMSG_LENGTH(len);
	memcpy(NLMSG_DATA(&r->h), hdr, len);
}

/* Appends an attribute; the room is sized for the largest message here,
 * so running out is a bug, not an input. */
static struct rtattr *nl_attr(struct nlreq *r, int type, const void *data, size_t len)
{
	struct rtattr *a = (struct rtattr *)((char *)&r->h + NLMSG_ALIGN(r->h.nlmsg_len));

	if (NLMSG_ALIGN(r->h.nlmsg_len) + RTA_SPACE(len) > sizeof(*r))
		abort();
	a->rta_type = (unsigned short)type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	if (len)
		memcpy(RTA_DATA(a), data, len);
	r->h.nlmsg_len = NLMSG_ALIGN(r->h.nlmsg_len) + RTA_ALIGN(a->rta_len);
	return a;
}

static void nl_str(struct nlreq *r, int type, const char *s)
{
	nl_attr(r, type, s, strlen(s) + 1);
}

static void nl_u8(struct nlreq *r, int type, uint8_t v)
{
	nl_attr(r, type, &v, sizeof(v));
}

static void nl_u32(struct nlreq *r, int type, uint32_t v)
{
	nl_attr(r, type, &v, sizeof(v));
}

/* A nest: begun empty, its length set by nl_end once its content is in. */
static struct rtattr *nl_nest(struct nlreq *r, int type)
{
	return nl_attr(r, type, NULL, 0);
}

static void nl_end(struct nlreq *r, struct rtattr *nest)
{
	nest->rta_len = (unsigned short)((char *)&r->h + r->h.nlmsg_len - (char *)nest);
}

/* Sends r on s and reads the kernel's ack: 0, or the errno it answered. */
static int nl_talk(int s, struct nlreq *r)
{
	static uint32_t seq;
	char ans[1024];
	ssize_t n;

	r->h.nlmsg_seq = ++seq;
	if (send(s, &r->h, r->h.nlmsg_len, 0) < 0)
		return errno;
	for (;;) {
		struct nlmsghdr *h;
		while ((n = recv(s, ans, sizeof(ans), 0)) < 0 && errno == EINTR)
			;
		if (n < 0)
			return errno;
		for (h = (struct nlmsghdr *)ans; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != r->h.nlmsg_seq || h->nlmsg_type != NLMSG_ERROR)
				continue;
			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
				return EPROTO;
			return -((struct nlmsgerr *)NLMSG_DATA(h))->error;
		}
	}
}

/* A NETLINK_ROUTE socket in netns (NULL: ours). */
static int rtnl_in(const char *netns, sbx_err *err)
{
	int self, s, e;

	if ((self = netns_enter(netns, err)) == -1)
		return -1;
	s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	e = errno;
	netns_leave(self, netns);
	if (s < 0)
		return sbx_err_set(err, 500, "net", "netlink socket%s%s: %s", netns ? " in " : "", netns ? netns : "",
				   strerror(e));
	return s;
}

/* dev's index in s's namespace (a socket's ioctls answer for the
 * namespace it was made in); <= 0 when there is no such device. */
static int ifindex_of(int s, const char *dev)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev);
	return ioctl(s, SIOCGIFINDEX, &ifr) < 0 ? -1 : ifr.ifr_ifindex;
}

/* "aa:bb:cc:dd:ee:ff" into 6 bytes; false when it is not one. */
static bool mac_parse(const char *s, unsigned char mac[6])
{
	return sscanf(s, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &mac[0], &mac[1], &mac[2], &mac[3], &mac[4], &mac[5]) == 6;
}

/* ---- what net.c asks -------------------------------------------------- */

int link_veth_add(const char *netns, const char *host, const char *peer, const char *peer_mac, const char *peer_netns,
		  sbx_err *err)
{
	cleanup_close int s = -1, nsfd = -1;
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	unsigned char mac[6];
	char path[300];
	struct rtattr *li, *data, *pa;
	struct nlreq r;
	int e;

	if (!mac_parse(peer_mac, mac))
		return sbx_err_set(err, 500, "net", "veth %s: bad MAC %.40s", host, peer_mac);
	snprintf(path, sizeof(path), NETNS_DIR "/%s", peer_netns);
	if ((nsfd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return sbx_err_sys(err, "net", "veth %s: open network namespace %s", host, peer_netns);
	if ((s = rtnl_in(netns, err)) < 0)
		return -1;
	nl_new(&r, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &ifi, sizeof(ifi));
	nl_str(&r, IFLA_IFNAME, host);
	li = nl_nest(&r, IFLA_LINKINFO);
	nl_str(&r, IFLA_INFO_KIND, "veth");
	data = nl_nest(&r, IFLA_INFO_DATA);
	pa = nl_nest(&r, VETH_INFO_PEER);
	r.h.nlmsg_len += sizeof(struct ifinfomsg); /* the peer's ifinfomsg, zeroed */
	nl_str(&r, IFLA_IFNAME, peer);
	nl_attr(&r, IFLA_ADDRESS, mac, sizeof(mac));
	nl_u32(&r, IFLA_NET_NS_FD, (uint32_t)nsfd);
	nl_end(&r, pa);
	nl_end(&r, data);
	nl_end(&r, li);
	if ((e = nl_talk(s, &r)) != 0)
		return sbx_err_set(err, 500, "net", "ip link add %s type veth peer %s failed: %s", host, peer, strerror(e));
	return 0;
}

int link_bridge_port(const char *netns, const char *dev, const char *alias, const char *bridge, sbx_err *err)
{
	cleanup_close int s = -1;
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	struct rtattr *spec, *in6, *li, *data;
	struct nlreq r;
	int idx, br, e;

	if ((s = rtnl_in(netns, err)) < 0)
		return -1;
	if ((idx = ifindex_of(s, dev)) <= 0 || (br = ifindex_of(s, bridge)) <= 0)
		return sbx_err_set(err, 500, "net", "ip link set %s master %s failed: %s", dev, bridge, strerror(ENODEV));
	/* named for net_list, no IPv6 (before it ever comes up), on the bridge */
	ifi.ifi_index = idx;
	nl_new(&r, RTM_NEWLINK, 0, &ifi, sizeof(ifi));
	nl_attr(&r, IFLA_IFALIAS, alias, strlen(alias));
	spec = nl_nest(&r, IFLA_AF_SPEC);
	in6 = nl_nest(&r, AF_INET6);
	nl_u8(&r, IFLA_INET6_ADDR_GEN_MODE, IN6_ADDR_GEN_MODE_NONE);
	nl_end(&r, in6);
	nl_end(&r, spec);
	nl_u32(&r, IFLA_MASTER, (uint32_t)br);
	if ((e = nl_talk(s, &r)) != 0)
		return sbx_err_set(err, 500, "net", "ip link set %s alias %s addrgenmode none master %s failed: %s", dev,
				   alias, bridge, strerror(e));
	/* isolated from the other ports, learning nothing; only once it is a
	 * port does the bridge take its port options */
	nl_new(&r, RTM_NEWLINK, 0, &ifi, sizeof(ifi));
	li = nl_nest(&r, IFLA_LINKINFO);
	nl_str(&r, IFLA_INFO_SLAVE_KIND, "bridge");
	data = nl_nest(&r, IFLA_INFO_SLAVE_DATA);
	nl_u8(&r, IFLA_BRPORT_ISOLATED, 1);
	nl_u8(&r, IFLA_BRPORT_LEARNING, 0);
	nl_end(&r, data);
	nl_end(&r, li);
	if ((e = nl_talk(s, &r)) != 0)
		return sbx_err_set(err, 500, "net", "ip link set %s type bridge_slave isolated on learning off failed: %s",
				   dev, strerror(e));
	return 0;
}

static int set_up(int s, int idx)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = idx, .ifi_flags = IFF_UP, .ifi_change = IFF_UP };
	struct nlreq r;

	nl_new(&r, RTM_NEWLINK, 0, &ifi, sizeof(ifi));
	return nl_talk(s, &r);
}

int link_up(const char *netns, const char *dev, sbx_err *err)
{
	cleanup_close int s = -1;
	int idx, e;

	if ((s = rtnl_in(netns, err)) < 0)
		return -1;
	if ((idx = ifindex_of(s, dev)) <= 0)
		return sbx_err_set(err, 500, "net", "ip link set dev %s up failed: %s", dev, strerror(ENODEV));
	if ((e = set_up(s, idx)) != 0)
		return sbx_err_set(err, 500, "net", "ip link set dev %s up failed: %s", dev, strerror(e));
	return 0;
}

int link_inside(const char *netns, const char *dev, const char *ip, int len, const char *gw, sbx_err *err)
{
	cleanup_close int s = -1;
	struct in_addr a, g;
	struct nlreq r;
	int lo, idx, e;

	if (inet_pton(AF_INET, ip, &a) != 1 || inet_pton(AF_INET, gw, &g) != 1 || len < 0 || len > 32)
		return sbx_err_set(err, 500, "net", "inside %s: bad address %.20s/%d via %.20s", netns, ip, len, gw);
	if ((s = rtnl_in(netns, err)) < 0)
		return -1;
	if ((lo = ifindex_of(s, "lo")) <= 0 || (idx = ifindex_of(s, dev)) <= 0)
		return sbx_err_set(err, 500, "net", "inside %s: no lo or %s: %s", netns, dev, strerror(ENODEV));
	if ((e = set_up(s, lo)) != 0)
		return sbx_err_set(err, 500, "net", "inside %s: ip link set dev lo up failed: %s", netns, strerror(e));
	{
		struct ifaddrmsg ifa = { .ifa_family = AF_INET, .ifa_prefixlen = (unsigned char)len,
					 .ifa_index = (unsigned)idx };
		nl_new(&r, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, &ifa, sizeof(ifa));
		nl_attr(&r, IFA_LOCAL, &a, sizeof(a));
		nl_attr(&r, IFA_ADDRESS, &a, sizeof(a));
		if ((e = nl_talk(s, &r)) != 0)
			return sbx_err_set(err, 500, "net", "inside %s: ip address add %s/%d dev %s failed: %s", netns,
					   ip, len, dev, strerror(e));
	}
	if ((e = set_up(s, idx)) != 0)
		return sbx_err_set(err, 500, "net", "inside %s: ip link set dev %s up failed: %s", netns, dev,
				   strerror(e));
	{
		struct rtmsg rt = { .rtm_family = AF_INET, .rtm_table = RT_TABLE_MAIN, .rtm_protocol = RTPROT_BOOT,
				    .rtm_scope = RT_SCOPE_UNIVERSE, .rtm_type = RTN_UNICAST, .rtm_flags = RTNH_F_ONLINK };
		nl_new(&r, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, &rt, sizeof(rt));
		nl_attr(&r, RTA_GATEWAY, &g, sizeof(g));
		nl_u32(&r, RTA_OIF, (uint32_t)idx);
		if ((e = nl_talk(s, &r)) != 0)
			return sbx_err_set(err, 500, "net", "inside %s: ip route add default via %s dev %s onlink failed: %s",
					   netns, gw, dev, strerror(e));
	}
	return 0;
}

int link_del(const char *netns, const char *dev, sbx_err *err)
{
	cleanup_close int s = -1;
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	struct nlreq r;
	int e;

	if ((s = rtnl_in(netns, err)) < 0)
		return -1;
	nl_new(&r, RTM_DELLINK, 0, &ifi, sizeof(ifi));
	nl_str(&r, IFLA_IFNAME, dev);
	e = nl_talk(s, &r);
	if (e != 0 && e != ENODEV)
		return sbx_err_set(err, 500, "net", "ip link del %s failed: %s", dev, strerror(e));
	return 0;
}

/* ---- neighbour entries -------------------------------------------------- */

int net_neigh(const char *netns, const char *dev, const char *ip, const char *mac, sbx_err *err)
{
	cleanup_close int s = -1;
	struct ndmsg nd = { .ndm_family = AF_INET, .ndm_state = mac ? NUD_PERMANENT : 0 };
	unsigned char ll[6];
	struct in_addr a;
	struct nlreq r;
	int idx, e;

	if (inet_pton(AF_INET, ip, &a) != 1)
		return sbx_err_set(err, 500, "net", "neighbour: bad address %.40s", ip);
	if (mac && !mac_parse(mac, ll))
		return sbx_err_set(err, 500, "net", "neighbour: bad MAC %.40s", mac);
	if ((s = rtnl_in(netns, err)) < 0)
		return -1;
	if ((idx = ifindex_of(s, dev)) <= 0)
		return mac ? sbx_err_set(err, 500, "net", "neighbour %s: no device %s", ip, dev) : 0;
	nd.ndm_ifindex = idx;
	nl_new(&r, mac ? RTM_NEWNEIGH : RTM_DELNEIGH, mac ? NLM_F_CREATE | NLM_F_REPLACE : 0, &nd, sizeof(nd));
	nl_attr(&r, NDA_DST, &a, sizeof(a));
	if (mac)
		nl_attr(&r, NDA_LLADDR, ll, sizeof(ll));
	e = nl_talk(s, &r);
	if (e == 0 || (!mac && e == ENOENT))
		return 0;
	return sbx_err_set(err, 500, "net", "neighbour %s dev %s %s: %s", ip, dev, mac ? "replace" : "del", strerror(e));
}

/* ---- named network namespaces ------------------------------------------ */

/* As `ip netns add NAME`: /run/netns made a shared mount (so the name is
 * seen from mount namespaces made later, runsc's among them), the file
 * made (EEXIST: never adopt one), and a new namespace bound on it. The
 * namespace is the calling thread's only until it comes back to its own. */
int netns_add(const char *name, sbx_err *err)
{
	char path[300];
	const char *step;
	bool bound = false;
	cleanup_close int fd = -1;
	int self, e;

	snprintf(path, sizeof(path), NETNS_DIR "/%s", name);
	if (mkdir(NETNS_DIR, 0755) < 0 && errno != EEXIST)
		return sbx_err_sys(err, "net", "ip netns add %s: mkdir " NETNS_DIR, name);
	while (mount("", NETNS_DIR, "none", MS_SHARED | MS_REC, NULL) < 0) {
		/* not a mount point yet: bind it on itself, once */
		if (errno != EINVAL || bound || mount(NETNS_DIR, NETNS_DIR, "none", MS_BIND | MS_REC, NULL) < 0)
			return sbx_err_sys(err, "net", "ip netns add %s: mount --make-rshared " NETNS_DIR, name);
		bound = true;
	}
	if ((fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0)) < 0)
		return sbx_err_sys(err, "net", "ip netns add %s: cannot create namespace file %s", name, path);
	if ((self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0) {
		step = "open this thread's network namespace";
		goto fail;
	}
	if (unshare(CLONE_NEWNET) < 0) {
		step = "unshare";
		e = errno;
		close(self);
		errno = e;
		goto fail;
	}
	e = mount("/proc/thread-self/ns/net", path, "none", MS_BIND, NULL) < 0 ? errno : 0;
	netns_leave(self, name);
	if (!e)
		return 0;
	step = "bind mount";
	errno = e;
fail:
	e = errno;
	unlink(path);
	errno = e;
	return sbx_err_sys(err, "net", "ip netns add %s: %s", name, step);
}

/* As `ip netns del NAME`: the bind mount detached (the namespace lives on
 * while something is in it), the file removed; none there is fine. */
int netns_del(const char *name, sbx_err *err)
{
	char path[300];

	snprintf(path, sizeof(path), NETNS_DIR "/%s", name);
	(void)umount2(path, MNT_DETACH);
	if (unlink(path) < 0 && errno != ENOENT)
		return sbx_err_sys(err, "net", "ip netns del %s: cannot remove namespace file %s", name, path);
	return 0;
}

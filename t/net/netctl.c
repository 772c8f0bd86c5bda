/* Test driver for workers/net.c (t/integration/net-*.t):
 *   netctl [-b BRIDGE] [-s SUBNET] [-u UPLINK_NETNS] [-i INTERNAL_RANGES]
 *          setup|create ID|destroy ID|destroy-at ID IP|list|apply ID MODE [ENTRY...]
 * create prints "NETNS VETH IP MAC"; destroy-at is destroy told the address
 * (as a node's destroy is, from the sandbox's net-ip); list prints one id a
 * line; apply puts
 * an egress policy in force (workers/egress.c). Errors go to
 * stderr, once, and the exit status is 1. */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "err.h"
#include "log.h"
#include "egress.h"
#include "net.h"

static int usage(void)
{
	fprintf(stderr, "usage: netctl [-b BRIDGE] [-s SUBNET] [-u UPLINK_NETNS] "
			"setup|create ID|destroy ID|destroy-at ID IP|list|apply ID MODE [ENTRY...]\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct net_config c = { "sbx0", "10.213.0.0/16", "", NULL, NULL };
	sbx_err err = SBX_ERR_INIT;
	int opt, rc = -1;

	while ((opt = getopt(argc, argv, "b:s:u:i:r:")) != -1) {
		switch (opt) {
		case 'b': c.bridge = optarg; break;
		case 's': c.subnet = optarg; break;
		case 'u': c.uplink_netns = optarg; break;
		case 'i': c.internal_ranges = optarg; break;
		case 'r': c.resolver = optarg; break;
		default: return usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1)
		return usage();
	sbx_log_init("netctl", NULL, "info");
	if (strcmp(argv[0], "setup") == 0 && argc == 1) {
		rc = net_node_setup(&c, &err);
	} else if (strcmp(argv[0], "create") == 0 && argc == 2) {
		struct net_sandbox s;
		rc = net_sandbox_create(&c, argv[1], &s, &err);
		if (rc == 0)
			printf("%s %s %s %s\n", s.netns, s.veth_host, s.ip, s.mac);
	} else if (strcmp(argv[0], "destroy") == 0 && argc == 2) {
		rc = net_sandbox_destroy(&c, argv[1], &err);
	} else if (strcmp(argv[0], "destroy-at") == 0 && argc == 3) {
		rc = net_sandbox_destroy_made_in(&c, argv[1], NULL, argv[2], &err);
	} else if (strcmp(argv[0], "list") == 0 && argc == 1) {
		char **ids;
		size_t n;
		rc = net_list(&c, &ids, &n, &err);
		if (rc == 0) {
			for (size_t i = 0; i < n; i++)
				printf("%s\n", ids[i]);
			net_list_free(ids, n);
		}
	} else if (strcmp(argv[0], "apply") == 0 && argc >= 3) {
		static struct sbx_egress p;
		json_t *allow = json_array();
		for (int i = 3; i < argc; i++)
			json_array_append_new(allow, json_string(argv[i]));
		rc = sbx_egress_parse(argv[2], allow, &p, &err);
		json_decref(allow);
		if (rc == 0)
			rc = egress_apply(&c, argv[1], &p, &err);
	} else {
		return usage();
	}
	if (rc < 0) {
		fprintf(stderr, "netctl: %s\n", err.msg);
		return 1;
	}
	return 0;
}

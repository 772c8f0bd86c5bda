/* The network's leftovers on this node: namespaces, host veths and the
 * table's per-sandbox chains and elements, by sandbox (placement) id, from
 * independent listings (`ip netns`, `ip -j link`, `nft -j list`). */
#include "config.h"
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <string.h>
#include "cleanup.h"
#include "host.h"
#include "log.h"
#include "net.h"
#include "net_int.h"

/* ---- listing leftovers ------------------------------------------------- */

static void idset_prefixed(struct host_idset *s, const char *name, const char *prefix)
{
	size_t pl = strlen(prefix);

	if (strncmp(name, prefix, pl) == 0)
		host_idset_add(s, name + pl, strlen(name + pl));
}

static void list_element(const char *ip, const char *target, void *arg)
{
	(void)ip;
	idset_prefixed(arg, target, CHAIN_ALLOW);
}

static void list_chain(const char *name, void *arg)
{
	idset_prefixed(arg, name, CHAIN_IN);
	idset_prefixed(arg, name, CHAIN_ALLOW);
}

void net_list_free(char **ids, size_t n)
{
	host_strv_free(ids, n);
}

int net_list(const struct net_config *c, char ***ids, size_t *n, sbx_err *err)
{
	static const char *const links[] = { "ip", "-j", "link", "show", NULL };
	struct host_idset s = { 0 };
	cleanup_host_out struct host_out o = { 0 };
	struct subnet sn;
	json_t *root = NULL, *e;
	DIR *d;
	size_t i;

	*ids = NULL;
	*n = 0;
	if (check_config(c, &sn, err) < 0)
		return sbx_err_ctx(err, "network leftovers");
	/* Namespaces: what `ip netns` lists. */
	d = opendir(NETNS_DIR);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d)))
			idset_prefixed(&s, de->d_name, "sbx-");
		closedir(d);
	} else if (errno != ENOENT) {
		sbx_err_sys(err, "net", "opendir " NETNS_DIR);
		goto fail;
	}
	/* Host ends of veths: named sbxh*, the full id in their alias. */
	if (net_run_ok(uplink(c), links, NULL, &o, err) < 0)
		goto fail;
	{
		json_error_t jerr;
		json_t *v = json_loads(o.out, 0, &jerr);
		json_array_foreach(v, i, e) {
			const char *name = json_string_value(json_object_get(e, "ifname"));
			const char *alias = json_string_value(json_object_get(e, "ifalias"));
			if (!name || strncmp(name, "sbxh", 4) != 0)
				continue;
			if (alias && strncmp(alias, "sbx-", 4) == 0)
				idset_prefixed(&s, alias, "sbx-");
			else
				log_warnx("veth %s has no sandbox id in its alias", name);
		}
		json_decref(v);
	}
	/* The table: per-sandbox chains and map elements. */
	if (table_json(c, &root, err) < 0)
		goto fail;
	if (root) {
		each_element(root, list_element, &s);
		each_chain(root, list_chain, &s);
		json_decref(root);
	}
	if (host_idset_take(&s, ids, n) < 0) {
		sbx_err_set(err, 500, "net", "out of memory");
		goto fail;
	}
	return 0;
fail:
	host_idset_free(&s);
	return sbx_err_ctx(err, "network leftovers");
}

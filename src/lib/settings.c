#include "config.h"
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cleanup.h"
#include "id.h"
#include "log.h"
#include "settings.h"

#define API SBX_FOR_API
#define WRK SBX_FOR_WORKER
#define ADM SBX_FOR_ADMIN
#define ALL SBX_FOR_ALL
#define R SBX_SF_RELOAD
#define S SBX_SF_SECRET

/* Keep sorted by topic; the order is the order of --help-config. */
const struct sbx_setting sbx_settings[] = {
	/* shared state */
	{ "db_url", SBX_ST_STR, "host=127.0.0.1 port=5432 dbname=sbx user=sbx", 0, 0, S, ALL,
	  "libpq connection string of the Postgres database (the source of truth)" },
	{ "amqp_url", SBX_ST_STR, "amqp://guest:guest@127.0.0.1:5672/", 0, 0, S, ALL,
	  "RabbitMQ URL: amqp://user:pass@host:port/vhost" },
	{ "auth_secret", SBX_ST_STR, "", 0, 0, S, API | ADM,
	  "64 hex digits: the key of the keyed hash under which API keys are stored" },
	{ "node_id", SBX_ST_STR, "", 0, 0, 0, WRK,
	  "this machine's node id (routing key of its node agent); empty: the host name" },
	{ "state_dir", SBX_ST_STR, "/var/lib/sbx", 0, 0, 0, WRK, "private state directory" },
	{ "registry_url", SBX_ST_STR, "http://127.0.0.1:5000", 0, 0, 0, API | WRK,
	  "the OCI registry holding template images and snapshots (the API deletes snapshots' images there)" },
	{ "snapshot_auto_keep", SBX_ST_INT, "5", 1, 100, R, WRK,
	  "automatic snapshots kept per sandbox: after a new one is ready, the oldest beyond this go "
	  "(record and image)" },
	{ "snapshot_helper", SBX_ST_STR, "", 0, 0, 0, WRK,
	  "path of the sbx-snapshot helper (packs and pushes snapshots); empty: beside sbx-worker, then libexec" },
	{ "rpc_timeout", SBX_ST_SECS, "60", 5, 600, R, API | WRK,
	  "seconds the API waits for a worker's reply (a create waits this long at most); "
	  "the provisioner gives the node a little less, so the API hears why" },

	/* logging and process control */
	{ "log_file", SBX_ST_STR, "", 0, 0, R, ALL, "log file; empty for standard error" },
	{ "log_level", SBX_ST_STR, "info", 0, 0, R, ALL, "debug, info, warn or error" },
	{ "api_socket", SBX_ST_STR, "/run/sbx/api.sock", 0, 0, 0, API,
	  "FastCGI socket: a path (unix socket) or HOST:PORT" },
	{ "api_socket_group", SBX_ST_STR, "", 0, 0, 0, API,
	  "group given read/write access to the unix socket (the web server's); empty: owner only" },
	{ "api_children", SBX_ST_INT, "8", 1, 512, 0, API,
	  "FastCGI children; each serves one request at a time, a streaming exec holds "
	  "one for its whole duration" },
	{ "api_short_requests", SBX_ST_INT, "0", 0, 512, 0, API,
	  "children that accept and serve short requests at once; the others wait their turn in the "
	  "listen queue. A request that waits on its client or a worker (exec, follow, wait, file "
	  "transfers, a request body, a create) gives its turn back, so this bounds CPU work, not "
	  "streams. 0: 4 per CPU (doc/nginx.md)" },
	{ "api_pidfile", SBX_ST_STR, "/run/sbx/sbx-api.pid", 0, 0, 0, API, "sbx-api pidfile" },
	{ "api_max_json_body", SBX_ST_BYTES, "1048576", 1024, 67108864, R, API,
	  "largest JSON request body accepted (413 beyond)" },
	{ "api_json_max_depth", SBX_ST_INT, "32", 2, 512, R, API,
	  "deepest nesting accepted in a JSON body (400 beyond)" },
	/* one tenant's share of the API children (doc/nginx.md "Per-organisation limits") */
	{ "api_org_max_requests", SBX_ST_INT, "4", 1, 10000, R, API,
	  "requests one organisation may have in flight at once, over all API processes and "
	  "machines (429 beyond); about half of api_children, so one tenant never holds every child "
	  "(sbx-admin org limits overrides it per organisation)" },
	{ "api_org_max_streams", SBX_ST_INT, "2", 1, 10000, R, API,
	  "long-running requests (exec, code, output follow, file transfers, stdin, wait) one "
	  "organisation may have at once (429 beyond); each also counts as a request; about a "
	  "quarter of api_children (sbx-admin org limits overrides it per organisation)" },
	{ "api_auth_cache_seconds", SBX_ST_SECS, "10", 0, 300, R, API,
	  "how long an API process may answer from its cache of key -> organisation without asking "
	  "Postgres again (0: ask on every request); a revoked key or changed organisation is "
	  "dropped from every cache at once through LISTEN sbx_auth, this is the bound if that "
	  "notification is missed" },
	{ "api_body_min_rate", SBX_ST_BYTES, "4096", 0, 1073741824, R, API,
	  "slowest average rate, in bytes per second of waiting for the client, at which a streamed "
	  "request body (file upload, stdin) may arrive once api_body_grace has passed (408 "
	  "beyond); 0: no floor" },
	{ "api_body_grace", SBX_ST_SECS, "10", 1, 3600, R, API,
	  "seconds of waiting for a request body before api_body_min_rate applies" },
	{ "sandbox_max_execs", SBX_ST_INT, "0", 0, 10000, R, API,
	  "execs (exec, code) one sandbox may run at once, over all API processes and machines "
	  "(429 sandbox_exec_limit beyond); 0: no limit but the organisation's streams (sbx-admin "
	  "org limits --max-sandbox-execs overrides it per organisation)" },
	/* requests per second per API key (doc/operations.md "Rate limits per API key") */
	{ "api_key_rate_per_s", SBX_ST_INT, "0", 0, 1000000, R, API,
	  "requests per second one API key may make, over all children of an sbx-api (429 "
	  "key_rate_limit with Retry-After beyond); 0: no limit (sbx-admin org limits --key-rate "
	  "overrides it per organisation)" },
	{ "api_key_burst", SBX_ST_INT, "0", 0, 1000000, R, API,
	  "requests a key may make at once after being idle (the token bucket's size); below "
	  "the key's rate (0 included) it is that rate (sbx-admin org limits --key-burst overrides it)" },
	{ "worker_pidfile", SBX_ST_STR, "/run/sbx/sbx-worker.pid", 0, 0, 0, WRK,
	  "sbx-worker pidfile" },
	{ "worker_provisioners", SBX_ST_INT, "1", 0, 64, R, WRK, "provisioner processes" },
	{ "worker_nodes", SBX_ST_INT, "1", 0, 1, R, WRK,
	  "node agent processes (0 or 1: one agent owns this machine's sandboxes)" },
	{ "worker_reapers", SBX_ST_INT, "1", 0, 4, R, WRK, "reaper processes" },
	{ "worker_restart_min_ms", SBX_ST_INT, "100", 1, 60000, R, API | WRK,
	  "first delay before a dead child is restarted; doubles while it keeps dying" },
	{ "worker_restart_max_ms", SBX_ST_INT, "30000", 1, 600000, R, API | WRK,
	  "longest delay before a dead child is restarted" },
	{ "drain_timeout", SBX_ST_SECS, "30", 0, 3600, R, API | WRK,
	  "seconds a draining master waits for children before killing them" },
	{ "reaper_interval", SBX_ST_SECS, "10", 1, 3600, R, WRK, "seconds between reaper passes" },

	/* the node: runsc and the sandbox's limits (DESIGN.md: The sandbox on a node) */
	{ "runsc_path", SBX_ST_STR, "/usr/bin/runsc", 0, 0, 0, WRK, "the runsc binary" },
	{ "runsc_platform", SBX_ST_STR, "systrap", 0, 0, R, WRK,
	  "gVisor platform: systrap (faster syscalls, chosen by bench/runsc-platforms) or ptrace" },
	{ "init_path", SBX_ST_STR, "", 0, 0, 0, WRK,
	  "host path of the static sbx-init; empty: next to sbx-worker's install (libexec)" },
	{ "sandbox_nproc", SBX_ST_INT, "2048", 16, 1000000, R, WRK,
	  "processes a sandbox may have (RLIMIT_NPROC inside: fork fails, the sandbox lives)" },
	{ "exec_spare_shell", SBX_ST_BOOL, "true", 0, 0, R, WRK,
	  "sbx-init keeps a started /bin/sh -s (dash images) for the next exec of the same cwd and env: "
	  "~10 ms less a command (doc/idle.md); for sandboxes started after a change" },
	{ "fault_points", SBX_ST_BOOL, "false", 0, 0, R, WRK,
	  "test hook: a node's start process (or a provisioner) stops itself (SIGSTOP) at a point armed by a file "
	  "state_dir/faults/POINT.armed, so a test can kill it exactly there (doc/testing.md); "
	  "off in production" },
	{ "sandbox_pids_max", SBX_ST_INT, "16384", 64, 4194304, R, WRK,
	  "host pids.max backstop per sandbox (counts gVisor's own threads too)" },
	{ "node_memory_mb", SBX_ST_INT, "0", 0, 16777216, R, WRK,
	  "memory promised to sandboxes at most; 0: the machine's memory" },
	{ "node_memory_overcommit", SBX_ST_INT, "150", 10, 1000, R, WRK,
	  "percent of node_memory_mb that sandboxes' limits may add up to" },
	{ "node_disk_overcommit", SBX_ST_INT, "100", 10, 1000, R, WRK,
	  "percent of the state directory's free disk that sandbox disks and volumes may add up to" },
	{ "node_max_sandboxes", SBX_ST_INT, "200", 1, 100000, R, WRK, "sandboxes this node runs at most" },
	/* disk pressure (doc/operator-guide.md "Disk pressure"): below either floor the node refuses
	 * creates, volume creates and snapshots; below twice a floor it frees unused images */
	{ "node_disk_min_free_pct", SBX_ST_INT, "5", 0, 99, R, WRK,
	  "percent of the state directory's filesystem that must stay free: below it the node refuses "
	  "new work (503 with the reason), below twice it frees template versions and snapshot layers no "
	  "sandbox uses (0: no floor)" },
	{ "node_disk_min_free_gb", SBX_ST_INT, "1", 0, 1000000, R, WRK,
	  "GB of the state directory's filesystem that must stay free, like node_disk_min_free_pct "
	  "(0: no floor)" },
	{ "stats_sample_interval", SBX_ST_SECS, "15", 1, 3600, R, WRK,
	  "seconds between two stats samples of a running sandbox (GET /sandboxes/{id}/stats)" },
	{ "stats_retention_hours", SBX_ST_INT, "168", 1, 87600, R, WRK,
	  "hours the node agents' stats samples (GET /sandboxes/{id}/stats) are kept in Postgres; the "
	  "reaper deletes older ones" },
	{ "net_bridge", SBX_ST_STR, "sbx0", 0, 0, 0, WRK, "bridge the sandboxes' veths are attached to" },
	{ "net_subnet", SBX_ST_STR, "10.213.0.0/16", 0, 0, 0, WRK,
	  "sandbox addresses; the gateway is the first address, on the bridge" },
	{ "net_uplink_netns", SBX_ST_STR, "", 0, 0, 0, WRK,
	  "named network namespace holding the bridge and its uplink; empty: the host's (tests use a private one)" },
	{ "net_internal_ranges", SBX_ST_STR, "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10", 0, 0, 0, WRK,
	  "IPv4 ranges (A.B.C.D/LEN, comma-separated) no sandbox may reach in any egress mode, besides "
	  "link-local/metadata, the node's own addresses and other sandboxes (always blocked)" },
	{ "net_resolver", SBX_ST_STR, "", 0, 0, 0, WRK,
	  "DNS server (A.B.C.D[:PORT]) the node asks, from the uplink netns, for the hostnames of restricted "
	  "sandboxes and for open sandboxes' queries; empty: the first nameserver of /etc/resolv.conf" },
	{ "start_timeout", SBX_ST_SECS, "45", 2, 600, R, WRK,
	  "seconds a sandbox may take to start before the create fails (keep below rpc_timeout)" },
	{ "init_answer_ms", SBX_ST_INT, "4000", 100, 60000, R, WRK,
	  "milliseconds a sandbox's sbx-init has to answer a request before it fails (503 sandbox_unresponsive); "
	  "a busy sandbox (its CPU time growing) gets up to 60 s more" },
	/* the warm pool (workers/pool.c); its specs must be the API's defaults
	 * (h_sandboxes.c) for a create without specs to be served from it */
	{ "warm_pool_size", SBX_ST_INT, "2", 0, 64, R, WRK,
	  "sandboxes started ahead per template, each handed to one create; 0: no warm pool" },
	{ "warm_pool_templates", SBX_ST_STR, "", 0, 0, R, WRK,
	  "templates with a warm pool, comma-separated; empty: every template this node has" },
	{ "warm_pool_cpu", SBX_ST_INT, "1000", 1, 2000, R, WRK, "cpu (MHz shares) of a warm pool sandbox" },
	{ "warm_pool_memory_mb", SBX_ST_INT, "512", 1, 1048576, R, WRK, "memory (MB) of a warm pool sandbox" },
	{ "warm_pool_disk_gb", SBX_ST_INT, "1", 1, 5, R, WRK, "disk (GB) of a warm pool sandbox" },
	{ "idle_freeze_ms", SBX_ST_INT, "2000", 0, 86400000, R, WRK,
	  "milliseconds without requests after which a sandbox with no process running inside is frozen "
	  "(no host CPU; thawed by its next request); 0: never" },

	/* where sandboxes run (workers/driver.h; doc/nomad.md) */
	{ "driver", SBX_ST_STR, "local", 0, 0, R, WRK,
	  "local (this machine's node agent) or nomad (one Nomad job per sandbox, doc/nomad.md)" },
	{ "nomad_addr", SBX_ST_STR, "http://127.0.0.1:4646", 0, 0, R, WRK,
	  "Nomad HTTP API address (http:// or https://)" },
	{ "nomad_region", SBX_ST_STR, "", 0, 0, R, WRK, "Nomad region of the jobs; empty: the agent's own" },
	{ "nomad_namespace", SBX_ST_STR, "sandboxes", 0, 0, R, WRK,
	  "Nomad namespace of the sandbox jobs (the reaper removes its jobs that no live record owns)" },
	{ "nomad_node_pool", SBX_ST_STR, "sandbox", 0, 0, R, WRK, "Nomad node pool the sandboxes run in" },
	{ "nomad_network", SBX_ST_STR, "sbx", 0, 0, R, WRK,
	  "CNI network of the sandboxes on the Nomad clients (the job's network mode is cni/NAME)" },
	{ "nomad_init_path", SBX_ST_STR, "/usr/libexec/sbx/sbx-init", 0, 0, R, WRK,
	  "host path of sbx-init on the Nomad clients, bound read-only into each sandbox" },
	{ "nomad_alloc_dir", SBX_ST_STR, "/var/lib/nomad/alloc", 0, 0, R, WRK,
	  "the Nomad client's allocation directory on this node (its data_dir/alloc): the node agent "
	  "reaches the sbx-init of a sandbox Nomad runs here at ID/alloc/sbx-init.sock under it" },
	{ "nomad_docker_host", SBX_ST_STR, "unix:///var/run/docker.sock", 0, 0, R, WRK,
	  "the Docker that runs Nomad's tasks on this node (unix:///PATH): the node agent pauses, resumes and "
	  "snapshots a sandbox Nomad runs here through it (freezing its container, reading its writable layer)" },
	{ "nomad_cni_socket", SBX_ST_STR, "", 0, 0, R, WRK,
	  "unix socket (root only) on which this node agent wires the sbx CNI network of the sandboxes Nomad "
	  "runs here, for the sbx-cni plugin (its config's \"socket\"); empty: not served" },
	{ "nomad_token_file", SBX_ST_STR, "", 0, 0, R, WRK,
	  "file holding the Nomad ACL token sent as X-Nomad-Token; empty: no token" },
	{ "nomad_ca_file", SBX_ST_STR, "", 0, 0, R, WRK, "CA bundle that signs Nomad's TLS certificate" },
	{ "nomad_client_cert", SBX_ST_STR, "", 0, 0, R, WRK, "client certificate for Nomad's mutual TLS" },
	{ "nomad_client_key", SBX_ST_STR, "", 0, 0, R, WRK, "key of nomad_client_cert" },
	{ "nomad_timeout_ms", SBX_ST_INT, "5000", 100, 120000, R, WRK,
	  "milliseconds one request to Nomad may take (a blocking query gets its wait on top); "
	  "beyond, the create or destroy fails with 503" },

	/* operator defaults (DESIGN.md: Defaults an operator can change) */
	{ "default_template", SBX_ST_STR, "debian-12", 0, 0, R, API, "template of a create that names none" },
	{ "default_egress", SBX_ST_STR, "deny_all", 0, 0, R, API,
	  "egress mode of a create that names none: deny_all, restricted or open" },
	{ "idle_timeout", SBX_ST_SECS, "1800", 60, 86400, R, API | WRK,
	  "seconds without activity before a sandbox is destroyed" },
	{ "max_lifetime", SBX_ST_SECS, "86400", 60, 2592000, R, API | WRK, "longest life of a sandbox" },
	{ "paused_limit", SBX_ST_SECS, "604800", 60, 31536000, R, WRK,
	  "longest a sandbox may stay paused" },
	{ "exec_timeout", SBX_ST_SECS, "30", 1, 300, R, API, "default exec timeout" },
	{ "exec_timeout_max", SBX_ST_SECS, "300", 1, 3600, R, API, "largest exec timeout accepted" },
	{ "exec_json_cap", SBX_ST_BYTES, "16777216", 1024, 1073741824, R, API,
	  "bytes kept per stream in a JSON (non-streamed) exec answer" },
	{ "file_max_bytes", SBX_ST_BYTES, "52428800", 1, 4294967296LL, R, API,
	  "largest file accepted by PUT .../files (413 beyond)" },
	{ "volume_min_gb", SBX_ST_INT, "10", 1, 100000, R, API, "smallest volume size" },
	{ "volume_max_gb", SBX_ST_INT, "50", 1, 100000, R, API, "largest volume size" },

	/* usage prices (GET /usage, sbx-admin usage, the monthly spending limit) */
	{ "price_cpu_core_hour_millicents", SBX_ST_INT, "5040", 0, 100000000, R, API | ADM,
	  "price of one CPU core (1000 MHz of specs.cpu) for an hour, in thousandths of a cent" },
	{ "price_memory_gb_hour_millicents", SBX_ST_INT, "1620", 0, 100000000, R, API | ADM,
	  "price of one GiB of sandbox memory for an hour, in thousandths of a cent" },
	{ "price_volume_gb_hour_millicents", SBX_ST_INT, "14", 0, 100000000, R, API | ADM,
	  "price of one GB of volume (its size, used or not) for an hour, in thousandths of a cent "
	  "(14: about $0.10 a GB-month)" },
	{ "price_snapshot_gb_hour_millicents", SBX_ST_INT, "7", 0, 100000000, R, API | ADM,
	  "price of one GiB of snapshot (its size_bytes) kept for an hour, in thousandths of a cent "
	  "(7: about $0.05 a GB-month)" },

	/* the single region of an embedded install: every sandbox it runs is in it */
	{ "region_id", SBX_ST_STR, "000000000000000000000001", 0, 0, R, API,
	  "id of this install's region: 24 lowercase hex digits, like every id (clients send it back as "
	  "a create's region and validate it as an id)" },
	{ "region_name", SBX_ST_STR, "Local", 0, 0, R, API, "display name of the region" },
	{ "region_country", SBX_ST_STR, "", 0, 0, R, API, "country of the region" },
	{ "region_continent", SBX_ST_STR, "", 0, 0, R, API, "continent of the region" },
};
const size_t sbx_settings_count = SBX_ARRAY_LEN(sbx_settings);

struct sbx_config {
	char *str[SBX_ARRAY_LEN(sbx_settings)];
	long long num[SBX_ARRAY_LEN(sbx_settings)];
	unsigned char set_in_file[SBX_ARRAY_LEN(sbx_settings)];
};

static int find(const char *name, size_t len)
{
	for (size_t i = 0; i < sbx_settings_count; i++)
		if (strlen(sbx_settings[i].name) == len && memcmp(sbx_settings[i].name, name, len) == 0)
			return (int)i;
	return -1;
}

static int parse_number(const struct sbx_setting *s, const char *v, long long *out, sbx_err *err)
{
	char *end;
	long long n, mul = 1;

	if (s->type == SBX_ST_BOOL) {
		if (!strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcmp(v, "1") ||
		    !strcasecmp(v, "on"))
			*out = 1;
		else if (!strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcmp(v, "0") ||
			 !strcasecmp(v, "off"))
			*out = 0;
		else
			return sbx_err_set(err, 0, "bad_config", "%s: not a boolean: '%s'", s->name, v);
		return 0;
	}
	if (!isdigit((unsigned char)v[0]))
		return sbx_err_set(err, 0, "bad_config", "%s: not a number: '%s'", s->name, v);
	errno = 0;
	n = strtoll(v, &end, 10);
	if (errno)
		return sbx_err_set(err, 0, "bad_config", "%s: out of range: '%s'", s->name, v);
	if (s->type == SBX_ST_SECS) {
		if (!strcmp(end, "s") || !*end)
			mul = 1;
		else if (!strcmp(end, "m"))
			mul = 60;
		else if (!strcmp(end, "h"))
			mul = 3600;
		else if (!strcmp(end, "d"))
			mul = 86400;
		else
			return sbx_err_set(err, 0, "bad_config", "%s: bad duration '%s' (use N, Ns, Nm, Nh or Nd)",
					   s->name, v);
	} else if (s->type == SBX_ST_BYTES) {
		if (!*end)
			mul = 1;
		else if (!strcmp(end, "K") || !strcmp(end, "KiB"))
			mul = 1024;
		else if (!strcmp(end, "M") || !strcmp(end, "MiB"))
			mul = 1024 * 1024;
		else if (!strcmp(end, "G") || !strcmp(end, "GiB"))
			mul = 1024LL * 1024 * 1024;
		else
			return sbx_err_set(err, 0, "bad_config", "%s: bad size '%s' (use N, NK, NM or NG)",
					   s->name, v);
	} else if (*end) {
		return sbx_err_set(err, 0, "bad_config", "%s: not a number: '%s'", s->name, v);
	}
	if (n > LLONG_MAX / mul)
		return sbx_err_set(err, 0, "bad_config", "%s: out of range: '%s'", s->name, v);
	n *= mul;
	if (n < s->min || n > s->max)
		return sbx_err_set(err, 0, "bad_config", "%s: %lld is outside %lld..%lld", s->name, n,
				   s->min, s->max);
	*out = n;
	return 0;
}

static int set_index(sbx_config *cfg, int i, const char *v, sbx_err *err)
{
	const struct sbx_setting *s = &sbx_settings[i];
	long long n = 0;
	char *copy;

	if (s->type != SBX_ST_STR && parse_number(s, v, &n, err) < 0)
		return -1;
	if (!strcmp(s->name, "log_level") && sbx_log_parse_level(v) < 0)
		return sbx_err_set(err, 0, "bad_config", "log_level: '%s' is not debug, info, warn or error", v);
	if (!strcmp(s->name, "region_id") && !sbx_id_valid(v))
		return sbx_err_set(err, 0, "bad_config", "region_id: '%s' is not 24 lowercase hex digits", v);
	copy = strdup(v);
	if (!copy)
		return sbx_err_sys(err, "nomem", "strdup");
	free(cfg->str[i]);
	cfg->str[i] = copy;
	cfg->num[i] = n;
	return 0;
}

static sbx_config *config_defaults(sbx_err *err)
{
	sbx_config *cfg = calloc(1, sizeof(*cfg));

	if (!cfg) {
		sbx_err_sys(err, "nomem", "calloc");
		return NULL;
	}
	for (size_t i = 0; i < sbx_settings_count; i++) {
		if (set_index(cfg, (int)i, sbx_settings[i].def, err) < 0) {
			sbx_config_free(cfg);
			return NULL;
		}
	}
	return cfg;
}

int sbx_config_set(sbx_config *cfg, const char *name, const char *value, sbx_err *err)
{
	int i = find(name, strlen(name));

	if (i < 0)
		return sbx_err_set(err, 0, "bad_config", "unknown setting '%s'", name);
	return set_index(cfg, i, value, err);
}

static char *trim(char *s, char *e)
{
	while (s < e && isspace((unsigned char)*s))
		s++;
	while (e > s && isspace((unsigned char)e[-1]))
		e--;
	*e = 0;
	return s;
}

int sbx_config_parse(const char *buf, size_t len, const char *origin, sbx_config **out, sbx_err *err)
{
	sbx_config *cfg = config_defaults(err);
	cleanup_free char *copy = NULL;
	char *line, *next;
	int lineno = 0;

	if (!cfg)
		return -1;
	copy = malloc(len + 1);
	if (!copy) {
		sbx_config_free(cfg);
		return sbx_err_sys(err, "nomem", "malloc");
	}
	memcpy(copy, buf, len);
	copy[len] = 0;
	if (memchr(buf, 0, len)) {
		sbx_config_free(cfg);
		return sbx_err_set(err, 0, "bad_config", "%s: contains a NUL byte", origin);
	}
	for (line = copy; line; line = next) {
		char *eq, *name, *val, *end;
		int i;

		lineno++;
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		end = line + strlen(line);
		name = trim(line, end);
		if (!*name || *name == '#' || *name == ';')
			continue;
		eq = strchr(name, '=');
		if (!eq) {
			sbx_config_free(cfg);
			return sbx_err_set(err, 0, "bad_config", "%s:%d: expected 'name = value'", origin, lineno);
		}
		val = trim(eq + 1, eq + 1 + strlen(eq + 1));
		name = trim(name, eq);
		if (val[0] == '"' && strlen(val) >= 2 && val[strlen(val) - 1] == '"') {
			val[strlen(val) - 1] = 0;
			val++;
		}
		i = find(name, strlen(name));
		if (i < 0) {
			sbx_config_free(cfg);
			return sbx_err_set(err, 0, "bad_config", "%s:%d: unknown setting '%s'", origin, lineno, name);
		}
		if (cfg->set_in_file[i]) {
			sbx_config_free(cfg);
			return sbx_err_set(err, 0, "bad_config", "%s:%d: '%s' is set twice", origin, lineno, name);
		}
		if (set_index(cfg, i, val, err) < 0) {
			sbx_config_free(cfg);
			return sbx_err_ctx(err, "%s:%d", origin, lineno);
		}
		cfg->set_in_file[i] = 1;
	}
	*out = cfg;
	return 0;
}

int sbx_config_load(const char *path, sbx_config **out, sbx_err *err)
{
	cleanup_close int fd = -1;
	cleanup_free char *buf = NULL;
	size_t len = 0, cap = 0;
	struct stat st;

	if (!path) {
		*out = config_defaults(err);
		return *out ? 0 : -1;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, "bad_config", "cannot open %s", path);
	if (fstat(fd, &st) < 0)
		return sbx_err_sys(err, "bad_config", "stat %s", path);
	if (st.st_size > 1 << 20)
		return sbx_err_set(err, 0, "bad_config", "%s: larger than 1 MiB", path);
	for (;;) {
		ssize_t r;
		if (len + 4096 > cap) {
			char *nb = realloc(buf, cap + 8192);
			if (!nb)
				return sbx_err_sys(err, "nomem", "realloc");
			buf = nb;
			cap += 8192;
		}
		r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return sbx_err_sys(err, "bad_config", "read %s", path);
		if (r == 0)
			break;
		len += (size_t)r;
		if (len > 1 << 20)
			return sbx_err_set(err, 0, "bad_config", "%s: larger than 1 MiB", path);
	}
	return sbx_config_parse(buf ? buf : "", len, path, out, err);
}

void sbx_config_free(sbx_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < sbx_settings_count; i++)
		free(cfg->str[i]);
	free(cfg);
}

static int must_find(const char *name)
{
	int i = find(name, strlen(name));

	if (i < 0)
		fatalx("internal: no setting named '%s'", name);
	return i;
}

const char *sbx_cfg_str(const sbx_config *cfg, const char *name)
{
	return cfg->str[must_find(name)];
}

long long sbx_cfg_int(const sbx_config *cfg, const char *name)
{
	return cfg->num[must_find(name)];
}

bool sbx_cfg_bool(const sbx_config *cfg, const char *name)
{
	return cfg->num[must_find(name)] != 0;
}

int sbx_config_check(const sbx_config *cfg, unsigned who, sbx_err *err)
{
	if (who & (SBX_FOR_API | SBX_FOR_ADMIN)) {
		const char *s = sbx_cfg_str(cfg, "auth_secret");
		size_t n = strlen(s);

		if (n != 64 || strspn(s, "0123456789abcdefABCDEF") != 64)
			return sbx_err_set(err, 0, "bad_config",
					   "auth_secret must be 64 hex digits (openssl rand -hex 32)");
	}
	if (who & SBX_FOR_WORKER) {
		if (sbx_cfg_int(cfg, "worker_restart_min_ms") > sbx_cfg_int(cfg, "worker_restart_max_ms"))
			return sbx_err_set(err, 0, "bad_config",
					   "worker_restart_min_ms is larger than worker_restart_max_ms");
	}
	if ((who & SBX_FOR_WORKER) && sbx_cfg_int(cfg, "start_timeout") + 3 > sbx_cfg_int(cfg, "rpc_timeout"))
		return sbx_err_set(err, 0, "bad_config", "start_timeout must be at least 3 s below rpc_timeout");
	if (sbx_cfg_int(cfg, "exec_timeout") > sbx_cfg_int(cfg, "exec_timeout_max"))
		return sbx_err_set(err, 0, "bad_config", "exec_timeout is larger than exec_timeout_max");
	if (sbx_cfg_int(cfg, "api_org_max_streams") > sbx_cfg_int(cfg, "api_org_max_requests"))
		return sbx_err_set(err, 0, "bad_config",
				   "api_org_max_streams is larger than api_org_max_requests (a stream is a request too)");
	if (sbx_cfg_int(cfg, "volume_min_gb") > sbx_cfg_int(cfg, "volume_max_gb"))
		return sbx_err_set(err, 0, "bad_config", "volume_min_gb is larger than volume_max_gb");
	if (who & SBX_FOR_WORKER) {
		const char *d = sbx_cfg_str(cfg, "driver"), *a = sbx_cfg_str(cfg, "nomad_addr");
		if (strcmp(d, "local") && strcmp(d, "nomad"))
			return sbx_err_set(err, 0, "bad_config", "driver must be local or nomad");
		if (!strcmp(d, "nomad") && strncmp(a, "http://", 7) && strncmp(a, "https://", 8))
			return sbx_err_set(err, 0, "bad_config", "nomad_addr must start with http:// or https://");
	}
	{
		const char *e = sbx_cfg_str(cfg, "default_egress");
		if (strcmp(e, "deny_all") && strcmp(e, "restricted") && strcmp(e, "open"))
			return sbx_err_set(err, 0, "bad_config",
					   "default_egress must be deny_all, restricted or open");
	}
	return 0;
}

int sbx_config_diff_nonreloadable(const sbx_config *old, const sbx_config *nw, unsigned who)
{
	int n = 0;

	for (size_t i = 0; i < sbx_settings_count; i++) {
		const struct sbx_setting *s = &sbx_settings[i];
		if (!(s->who & who) || (s->flags & SBX_SF_RELOAD))
			continue;
		if (strcmp(old->str[i], nw->str[i]) != 0) {
			log_warnx("setting %s changed but takes effect only on restart", s->name);
			n++;
		}
	}
	return n;
}

static const char *type_name(enum sbx_stype t)
{
	switch (t) {
	case SBX_ST_STR: return "string";
	case SBX_ST_INT: return "integer";
	case SBX_ST_BOOL: return "boolean";
	case SBX_ST_SECS: return "duration";
	case SBX_ST_BYTES: return "size";
	}
	return "?";
}

void sbx_config_print_help(FILE *f, unsigned who)
{
	for (size_t i = 0; i < sbx_settings_count; i++) {
		const struct sbx_setting *s = &sbx_settings[i];
		if (!(s->who & who))
			continue;
		fprintf(f, "%-24s %-8s default: %s%s%s\n", s->name, type_name(s->type),
			s->def[0] ? s->def : "(empty)", (s->flags & SBX_SF_RELOAD) ? ", reloadable" : "",
			(s->flags & SBX_SF_SECRET) ? ", secret" : "");
		if (s->type != SBX_ST_STR && s->type != SBX_ST_BOOL)
			fprintf(f, "%-24s range %lld..%lld\n", "", s->min, s->max);
		fprintf(f, "%-24s %s\n", "", s->doc);
	}
}

/* Every setting, as the Markdown table of doc/operator-guide.md (a test
 * compares the two); '|' never appears in names, defaults or docs. */
void sbx_config_print_markdown(FILE *f)
{
	fprintf(f, "| setting | type | default | range | reload | read by | meaning |\n");
	fprintf(f, "|---|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < sbx_settings_count; i++) {
		const struct sbx_setting *s = &sbx_settings[i];
		char range[64] = "", who[32] = "";
		if (s->type != SBX_ST_STR && s->type != SBX_ST_BOOL)
			snprintf(range, sizeof(range), "%lld..%lld", s->min, s->max);
		snprintf(who, sizeof(who), "%s%s%s", (s->who & SBX_FOR_API) ? ", api" : "",
			 (s->who & SBX_FOR_WORKER) ? ", worker" : "", (s->who & SBX_FOR_ADMIN) ? ", sbx-admin" : "");
		fprintf(f, "| `%s` | %s | %s%s%s | %s | %s | %s | %s |\n", s->name, type_name(s->type),
			s->def[0] ? "`" : "", s->def[0] ? s->def : "(empty)", s->def[0] ? "`" : "", range,
			(s->flags & SBX_SF_RELOAD) ? "yes" : "no", who[0] ? who + 2 : "", s->doc);
	}
}

void sbx_config_print_sample(FILE *f, unsigned who)
{
	fprintf(f, "# sbx configuration (sample). One 'name = value' a line.\n");
	for (size_t i = 0; i < sbx_settings_count; i++) {
		const struct sbx_setting *s = &sbx_settings[i];
		if (!(s->who & who))
			continue;
		fprintf(f, "\n# %s (%s%s)\n#%s = %s\n", s->doc, type_name(s->type),
			(s->flags & SBX_SF_RELOAD) ? ", reloadable" : "", s->name, s->def);
	}
}

void sbx_config_print_values(FILE *f, const sbx_config *cfg, unsigned who)
{
	for (size_t i = 0; i < sbx_settings_count; i++) {
		const struct sbx_setting *s = &sbx_settings[i];
		if (!(s->who & who))
			continue;
		fprintf(f, "%s = %s\n", s->name, (s->flags & SBX_SF_SECRET) ? "(secret)" : cfg->str[i]);
	}
}

/* The Nomad driver: one Nomad job per sandbox, registered over Nomad's HTTP
 * API (doc/nomad.md). The job id is written on the record before the job
 * is registered, so whatever happens next the reaper can find the job;
 * ready means Nomad placed the allocation and its task runs (waited for
 * with blocking queries, bounded by start_timeout); a create that fails
 * deregisters the job with purge and fails with Nomad's reason. Every
 * request has a bound (nomad_timeout_ms, plus the wait of a blocking
 * query), so a slow or silent Nomad becomes a 503 with the reason, never a
 * hung provisioner. Commands, files and egress stay the node agent's
 * (routed by the allocation's node name), never Nomad's exec API: once the
 * allocation runs, that agent adopts the sandbox (adopt.c) with the
 * channel key sbx-init got, and only its answer makes it ready. The key is
 * never in the job: it is written first to the Nomad Variable
 * nomad/jobs/<job id>, which the task's template renders into its
 * environment; every failure deletes it, as do destroy and the reaper.
 *
 * Tested against t/nomad-contract/server.py, a contract server that
 * answers as Nomad's documented API does (it is not Nomad) and runs the
 * task through Docker with runsc the way Nomad's docker driver would. */
#include "config.h"
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include "chanauth.h"
#include "cleanup.h"
#include "curlbody.h"
#include "daemon.h"
#include "driver.h"
#include "json.h"
#include "log.h"
#include "nomad_job.h"
#include "reply.h"
#include "roles.h"
#include "sandbox_state.h"

#define NOMAD_MAX_ANSWER (8u << 20) /* a job list of a big namespace fits */
#define NOMAD_MAX_WAIT_MS 10000     /* one blocking query waits at most this long */

struct nresp {
	struct sbx_curl_body b; /* the body, up to NOMAD_MAX_ANSWER */
	long status;
	unsigned long long index; /* X-Nomad-Index, 0 when absent */
};

static void nresp_free(struct nresp *r)
{
	free(r->b.data);
	memset(r, 0, sizeof(*r));
}
#define cleanup_nresp __attribute__((cleanup(nresp_free)))

static void curl_cleanupp(CURL **c)
{
	if (*c)
		curl_easy_cleanup(*c);
}
static void slist_freep(struct curl_slist **l)
{
	if (*l)
		curl_slist_free_all(*l);
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static size_t on_header(char *p, size_t sz, size_t n, void *arg)
{
	struct nresp *r = arg;
	size_t len = sz * n;
	static const char name[] = "X-Nomad-Index:";

	if (len > sizeof(name) && !strncasecmp(p, name, sizeof(name) - 1)) {
		char v[32];
		size_t vl = len - (sizeof(name) - 1);
		if (vl >= sizeof(v))
			vl = sizeof(v) - 1;
		memcpy(v, p + sizeof(name) - 1, vl);
		v[vl] = 0;
		r->index = strtoull(v, NULL, 10);
	}
	return len;
}

/* The ACL token, read at each request (a rotated file is picked up at once). */
static int read_token(const char *path, char *buf, size_t sz, sbx_err *err)
{
	cleanup_close int fd = -1;
	ssize_t n;
	size_t b = 0, e;

	buf[0] = 0;
	if (!path[0])
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return sbx_err_sys(err, "nomad_unavailable", "cannot read nomad_token_file %s", path);
	n = read(fd, buf, sz - 1);
	if (n < 0)
		return sbx_err_sys(err, "nomad_unavailable", "cannot read nomad_token_file %s", path);
	buf[n] = 0;
	e = (size_t)n;
	while (b < e && isspace((unsigned char)buf[b]))
		b++;
	while (e > b && isspace((unsigned char)buf[e - 1]))
		e--;
	memmove(buf, buf + b, e - b);
	buf[e - b] = 0;
	for (size_t i = 0; buf[i]; i++)
		if (!isgraph((unsigned char)buf[i]))
			return sbx_err_set(err, 503, "nomad_unavailable", "nomad_token_file %s holds more than one token",
					   path);
	return 0;
}

/* One request to Nomad. wait_ms is the wait of a blocking query (0: none)
 * and is added to the bound. Transport failures are 503 with curl's
 * reason; the HTTP status is the caller's to judge (nomad_check). */
static int nomad_http(struct driver *d, const char *method, const char *path, const char *body, long wait_ms,
		      struct nresp *r, sbx_err *err)
{
	const sbx_config *c = d->cfg;
	const char *addr = sbx_cfg_str(c, "nomad_addr");
	long tmo = (long)sbx_cfg_int(c, "nomad_timeout_ms");
	cleanup_free char *url = NULL;
	__attribute__((cleanup(curl_cleanupp))) CURL *h = NULL;
	__attribute__((cleanup(slist_freep))) struct curl_slist *hdrs = NULL;
	char token[512], th[600], ebuf[CURL_ERROR_SIZE] = "";
	size_t al = strlen(addr);
	CURLcode rc;

	memset(r, 0, sizeof(*r));
	r->b.max = NOMAD_MAX_ANSWER;
	if (read_token(sbx_cfg_str(c, "nomad_token_file"), token, sizeof(token), err) < 0)
		return -1;
	while (al && addr[al - 1] == '/')
		al--;
	if (asprintf(&url, "%.*s%s", (int)al, addr, path) < 0)
		return sbx_err_set(err, 500, "nomem", "building a Nomad URL");
	h = curl_easy_init();
	if (!h)
		return sbx_err_set(err, 500, "nomem", "curl_easy_init");
	if (token[0]) {
		snprintf(th, sizeof(th), "X-Nomad-Token: %s", token);
		hdrs = curl_slist_append(hdrs, th);
	}
	if (body)
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, tmo);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, tmo + wait_ms);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sbx_curl_body_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &r->b);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	if (hdrs)
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	if (sbx_cfg_str(c, "nomad_ca_file")[0])
		curl_easy_setopt(h, CURLOPT_CAINFO, sbx_cfg_str(c, "nomad_ca_file"));
	if (sbx_cfg_str(c, "nomad_client_cert")[0])
		curl_easy_setopt(h, CURLOPT_SSLCERT, sbx_cfg_str(c, "nomad_client_cert"));
	if (sbx_cfg_str(c, "nomad_client_key")[0])
		curl_easy_setopt(h, CURLOPT_SSLKEY, sbx_cfg_str(c, "nomad_client_key"));
	rc = curl_easy_perform(h);
	if (rc == CURLE_OPERATION_TIMEDOUT)
		return sbx_err_set(err, 503, "nomad_timeout", "Nomad at %.*s did not answer %s %s within %ld ms", (int)al,
				   addr, method, path, tmo + wait_ms);
	if (rc == CURLE_WRITE_ERROR && r->b.too_big)
		return sbx_err_set(err, 503, "bad_nomad_reply", "Nomad's answer to %s %s is larger than %u bytes", method,
				   path, NOMAD_MAX_ANSWER);
	if (rc != CURLE_OK)
		return sbx_err_set(err, 503, "nomad_unavailable", "Nomad at %.*s is unavailable: %s", (int)al, addr,
				   ebuf[0] ? ebuf : curl_easy_strerror(rc));
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
	if (!r->b.data) {
		r->b.data = strdup("");
		if (!r->b.data)
			return sbx_err_set(err, 500, "nomem", "Nomad's answer");
	}
	return 0;
}

static int nomad_check(const struct nresp *r, const char *what, sbx_err *err)
{
	return nomad_status_check(r->status, r->b.data, r->b.len, what, err);
}

/* "namespace=NS&region=R" (escaped); each present only when set. */
static int nomad_scope(struct driver *d, char *buf, size_t sz, sbx_err *err)
{
	const char *ns = sbx_cfg_str(d->cfg, "nomad_namespace"), *rg = sbx_cfg_str(d->cfg, "nomad_region");
	char *ens = curl_easy_escape(NULL, ns, 0), *erg = curl_easy_escape(NULL, rg, 0);
	int n;

	if (!ens || !erg) {
		curl_free(ens);
		curl_free(erg);
		return sbx_err_set(err, 500, "nomem", "escaping");
	}
	n = snprintf(buf, sz, "%s%s%s%s%s", ns[0] ? "namespace=" : "", ens, ns[0] && rg[0] ? "&" : "",
		     rg[0] ? "region=" : "", erg);
	curl_free(ens);
	curl_free(erg);
	return n < 0 || (size_t)n >= sz ? sbx_err_set(err, 500, "bad_config", "nomad_namespace or nomad_region is too long")
					 : 0;
}

static int deregister(struct driver *d, const char *job, sbx_err *err)
{
	cleanup_nresp struct nresp r = { 0 };
	char scope[400], path[600];

	if (nomad_scope(d, scope, sizeof(scope), err) < 0)
		return -1;
	snprintf(path, sizeof(path), "/v1/job/%s?purge=true%s%s", job, scope[0] ? "&" : "", scope);
	if (nomad_http(d, "DELETE", path, NULL, 0, &r, err) < 0)
		return -1;
	if (r.status == 404) /* gone already: a destroy is idempotent */
		return 0;
	return nomad_check(&r, "deregister the sandbox's job", err);
}

/* The sandbox's channel key, in the Nomad Variable its job's template
 * reads (nomad/jobs/<job id>, in the job's namespace): only the job's
 * workload identity, and tokens whose policy grants that path, read it. */
static int var_put(struct driver *d, const char *job, const char *key_hex, sbx_err *err)
{
	cleanup_nresp struct nresp r = { 0 };
	cleanup_json json_t *body = NULL;
	cleanup_free char *text = NULL;
	char scope[400], var[128], path[700];
	int rc;

	if (nomad_scope(d, scope, sizeof(scope), err) < 0)
		return -1;
	if (!nomad_var_path(job, var, sizeof(var)))
		return sbx_err_set(err, 500, "internal", "the job id %s is too long for a variable path", job);
	body = nomad_var_build(sbx_cfg_str(d->cfg, "nomad_namespace"), var, key_hex);
	text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	if (!text)
		return sbx_err_set(err, 500, "nomem", "building the Nomad variable");
	snprintf(path, sizeof(path), "/v1/var/%s%s%s", var, scope[0] ? "?" : "", scope);
	rc = nomad_http(d, "PUT", path, text, 0, &r, err);
	explicit_bzero(text, strlen(text));
	if (rc < 0)
		return -1;
	return nomad_check(&r, "store the sandbox's channel key in a Nomad variable", err);
}

/* Idempotent: a variable already gone is fine. */
static int var_delete(struct driver *d, const char *job, sbx_err *err)
{
	cleanup_nresp struct nresp r = { 0 };
	char scope[400], var[128], path[700];

	if (nomad_scope(d, scope, sizeof(scope), err) < 0)
		return -1;
	if (!nomad_var_path(job, var, sizeof(var)))
		return sbx_err_set(err, 500, "internal", "the job id %s is too long for a variable path", job);
	snprintf(path, sizeof(path), "/v1/var/%s%s%s", var, scope[0] ? "?" : "", scope);
	if (nomad_http(d, "DELETE", path, NULL, 0, &r, err) < 0)
		return -1;
	if (r.status == 404)
		return 0;
	return nomad_check(&r, "delete the sandbox's channel key variable", err);
}

/* A blocking query: waits until Nomad's index passes *index or the wait
 * (bounded by the deadline) ends, then moves *index on. */
static int blocking_get(struct driver *d, const char *base, unsigned long long *index, long long deadline,
			struct nresp *r, const char *what, sbx_err *err)
{
	char path[700];
	long long left = deadline - now_ms();
	long wait = left > NOMAD_MAX_WAIT_MS ? NOMAD_MAX_WAIT_MS : (long)(left > 0 ? left : 0);
	long long t0 = now_ms();

	/* Nomad reads a wait of 0 as its default (5 minutes): at the
	 * deadline, one plain read instead */
	if (wait < 50)
		snprintf(path, sizeof(path), "%s", base);
	else
		snprintf(path, sizeof(path), "%s%sindex=%llu&wait=%ldms", base, strchr(base, '?') ? "&" : "?", *index,
			 wait);
	if (nomad_http(d, "GET", path, NULL, wait, r, err) < 0 || nomad_check(r, what, err) < 0)
		return -1;
	/* a server that answers at once with the same index would make this
	 * loop spin: pace it */
	if (r->index <= *index && now_ms() - t0 < 100)
		worker_sleep_ms(100);
	if (r->index > *index)
		*index = r->index;
	return 0;
}

static int record_note(struct driver *d, const char *id, const char *col_sql, const char *val, sbx_err *err)
{
	if (!d->db)
		return sbx_err_set(err, 500, "internal", "the Nomad driver has no database connection");
	return sbx_db_query(d->db, NULL, err, col_sql, 2, id, val);
}

/* Waits for the evaluation, then for the allocation; fills *a when running. */
static int wait_running(struct driver *d, const char *job, const char *eval_id, long long deadline,
			struct nomad_alloc *a, bool *capacity, sbx_err *err)
{
	char scope[400], base[600];
	unsigned long long index = 0;

	if (nomad_scope(d, scope, sizeof(scope), err) < 0)
		return -1;
	while (eval_id[0]) {
		cleanup_nresp struct nresp r = { 0 };
		struct nomad_eval ev;

		snprintf(base, sizeof(base), "/v1/evaluation/%s%s%s", eval_id, scope[0] ? "?" : "", scope);
		if (blocking_get(d, base, &index, deadline, &r, "read the job's evaluation", err) < 0 ||
		    nomad_eval_parse(r.b.data, r.b.len, &ev, err) < 0)
			return -1;
		if (ev.phase == NOMAD_EVAL_FAILED) {
			*capacity = !strncmp(ev.reason, "no node", 7);
			return sbx_err_set(err, 503, *capacity ? "no_capacity" : "start_failed", "Nomad: %s", ev.reason);
		}
		if (ev.phase == NOMAD_EVAL_PLACED)
			break;
		if (now_ms() >= deadline)
			return sbx_err_set(err, 503, "start_failed",
					   "Nomad did not place the sandbox within start_timeout (evaluation pending)");
	}
	index = 0;
	for (;;) {
		cleanup_nresp struct nresp r = { 0 };

		snprintf(base, sizeof(base), "/v1/job/%s/allocations%s%s", job, scope[0] ? "?" : "", scope);
		if (blocking_get(d, base, &index, deadline, &r, "read the job's allocations", err) < 0 ||
		    nomad_allocs_parse(r.b.data, r.b.len, NULL, a, err) < 0)
			return -1;
		if (a->phase == NOMAD_ALLOC_RUNNING)
			return 0;
		if (a->phase == NOMAD_ALLOC_DEAD)
			return sbx_err_set(err, 503, "start_failed", "Nomad: the sandbox's task did not start: %s",
					   a->reason);
		if (now_ms() >= deadline)
			return sbx_err_set(err, 503, "start_failed",
					   "Nomad did not start the sandbox within start_timeout (allocation %s)",
					   a->phase == NOMAD_ALLOC_NONE ? "not placed" : a->client_status);
	}
}

/* The allocation's node agent takes the sandbox over: it connects to the
 * sbx-init Nomad started (its socket in the allocation's directory) and
 * proves both ends with the channel key; it answers once sbx-init has
 * answered, which is what makes the sandbox ready. */
static int adopt(struct driver *d, const struct sandbox_rec *s, const char *node, const char *alloc_id,
		 const char *key_hex, long long deadline, sbx_err *err)
{
	json_error_t jerr;
	json_t *allow = json_loads(s->egress_allow_json ? s->egress_allow_json : "[]", 0, &jerr);
	/* the record's policy, put in force on the network sbx-cni had the
	 * agent wire (deny_all until then): never looser than the record */
	cleanup_json json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:o}}", "sandbox_id", s->id, "placement_id",
					      s->id, "alloc_id", alloc_id, "chan_key", key_hex, "egress", "mode",
					      s->egress_mode[0] ? s->egress_mode : "deny_all", "allow",
					      allow ? allow : json_array());
	cleanup_reply struct sbx_reply rep = { 0 };
	long long left = deadline - now_ms();

	if (driver_node_call(d, node, SBX_MSG_ADOPT, body, left > 2000 ? (int)left : 2000, NULL, &rep, err) < 0)
		return sbx_err_ctx(err, "handing the sandbox to its node agent");
	if (!rep.ok)
		return sbx_err_set(err, 503, "start_failed", "node %s could not take the sandbox over: %s", node,
				   rep.error ? rep.error : "no reason given");
	return 0;
}

/* The node agent forgets a sandbox it adopted (its ops end); best effort:
 * a node that does not answer finds the allocation gone by itself. */
static void forget(struct driver *d, const struct sandbox_rec *s, const char *node)
{
	cleanup_json json_t *body = json_pack("{s:s, s:s}", "sandbox_id", s->id, "placement_id", s->id);
	cleanup_reply struct sbx_reply rep = { 0 };
	sbx_err err = SBX_ERR_INIT;

	if (!node[0])
		return;
	if (driver_node_call(d, node, SBX_MSG_DESTROY, body, 5000, NULL, &rep, &err) < 0 || !rep.ok)
		log_warnx("sandbox %s: node %s did not confirm it let the sandbox go: %s", s->id, node,
			  err.msg[0] ? err.msg : rep.error ? rep.error : "no reason given");
}

/* The volume's node mounts the sandbox's volume on the host (nomad_vol.h);
 * src := the directory the task binds. */
static int volume_mount(struct driver *d, const struct sandbox_rec *s, char *src, size_t sz, sbx_err *err)
{
	static const char *const extra[] = { "source", NULL };
	cleanup_json json_t *body = json_pack("{s:s, s:s, s:i, s:b}", "sandbox_id", s->id, "volume_id", s->volume_id,
					      "size_gb", s->volume_gb > 0 ? s->volume_gb : 1, "create", s->volume_create);
	cleanup_reply struct sbx_reply rep = { 0 };
	const char *got;

	if (driver_node_call(d, s->volume_node, SBX_MSG_VOLUME_MOUNT, body,
			     (int)(sbx_cfg_int(d->cfg, "start_timeout") / 2) * 1000, extra, &rep, err) < 0)
		return sbx_err_ctx(err, "mounting volume %s on node %s", s->volume_id, s->volume_node);
	if (!rep.ok)
		return sbx_err_set(err, 503, rep.code && !strcmp(rep.code, "no_capacity") ? "no_capacity" : "start_failed",
				   "volume %s on node %s: %s", s->volume_id, s->volume_node,
				   rep.error ? rep.error : "no reason given");
	got = sbx_reply_str(&rep, "source");
	if (!got || got[0] != '/' || strstr(got, "/../") || (size_t)snprintf(src, sz, "%s", got) >= sz)
		return sbx_err_set(err, 503, "bad_reply", "node %s named no usable directory for volume %s",
				   s->volume_node, s->volume_id);
	return 0;
}

static int nomad_start(struct driver *d, const struct sandbox_rec *s, struct placement *out, sbx_err *err)
{
	const sbx_config *c = d->cfg;
	char job[64], image[512], scope[400], path[500], eval_id[80], var[128], key_hex[SBX_CHAN_KEY_HEX + 1];
	char vsrc[400] = "";
	uint8_t key[SBX_CHAN_KEY_LEN];
	cleanup_json json_t *env = NULL, *body = NULL;
	cleanup_free char *text = NULL;
	cleanup_nresp struct nresp r = { 0 };
	struct nomad_alloc a;
	json_error_t jerr;
	long long deadline;
	bool capacity = false;
	sbx_err uerr = SBX_ERR_INIT;

	if (!nomad_job_id(s->id, job, sizeof(job)) || !nomad_var_path(job, var, sizeof(var)) ||
	    nomad_image_ref(sbx_cfg_str(c, "registry_url"), s->template, s->image, image, sizeof(image), err) < 0 ||
	    nomad_scope(d, scope, sizeof(scope), err) < 0)
		return -1;
	if (s->volume_id[0] && !s->volume_node[0])
		return sbx_err_set(err, 503, "start_failed", "volume %s names no node", s->volume_id);
	if (s->from_snapshot[0] && !s->image[0])
		return sbx_err_set(err, 503, "start_failed", "snapshot %s is gone", s->from_snapshot);
	/* sbx-init's channel key, as the local driver makes one per sandbox:
	 * to the task through a Nomad Variable its template renders (never
	 * in the job), to the node agent in the adopt request */
	if (sbx_chan_random(key, sizeof(key), err) < 0)
		return -1;
	sbx_chan_key_hex(key, key_hex);
	explicit_bzero(key, sizeof(key));
	/* the volume's node mounts it first: the job binds that directory */
	if (s->volume_id[0] && volume_mount(d, s, vsrc, sizeof(vsrc), err) < 0) {
		explicit_bzero(key_hex, sizeof(key_hex));
		return -1;
	}
	env = json_loads(s->env_json ? s->env_json : "{}", 0, &jerr);
	body = nomad_job_build(&(struct nomad_job_spec){
		.sandbox_id = s->id,
		.namespace_ = sbx_cfg_str(c, "nomad_namespace"),
		.region = sbx_cfg_str(c, "nomad_region"),
		.node_pool = sbx_cfg_str(c, "nomad_node_pool"),
		.network = sbx_cfg_str(c, "nomad_network"),
		.image = image,
		.init_path = sbx_cfg_str(c, "nomad_init_path"),
		.cpu = s->cpu,
		.memory_mb = s->memory_mb,
		.pids_limit = (int)sbx_cfg_int(c, "sandbox_pids_max"),
		.nproc = (int)sbx_cfg_int(c, "sandbox_nproc"),
		.spare_shell = sbx_cfg_bool(c, "exec_spare_shell"),
		.env = env,
		.chan_var = var,
		.volume_node = s->volume_id[0] ? s->volume_node : NULL,
		.volume_source = s->volume_id[0] ? vsrc : NULL,
		.volume_target = s->mount_path[0] ? s->mount_path : "/workspace",
	});
	text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	if (!text) {
		sbx_err_set(err, 500, "nomem", "building the Nomad job");
		goto undo_mount;
	}
	/* the intent first: the reaper finds the job by it whatever happens next */
	if (record_note(d, s->id, "UPDATE sandboxes SET nomad_job_id = $2, nomad_alloc_id = NULL WHERE id = $1", job,
			err) < 0) {
		sbx_err_ctx(err, "noting the Nomad job on the record");
		goto undo_mount;
	}
	/* keep below the provisioner's own deadline (start_timeout + 3 <= rpc_timeout) */
	deadline = now_ms() + sbx_cfg_int(c, "start_timeout") * 1000;
	/* the variable before the job: its template blocks until it exists */
	if (var_put(d, job, key_hex, err) < 0)
		goto undo_var; /* a timeout may still have written it */
	snprintf(path, sizeof(path), "/v1/jobs%s%s", scope[0] ? "?" : "", scope);
	if (nomad_http(d, "POST", path, text, 0, &r, err) < 0 || nomad_check(&r, "register the sandbox's job", err) < 0 ||
	    nomad_register_parse(r.b.data, r.b.len, eval_id, sizeof(eval_id), err) < 0)
		goto undo; /* a timeout may still have registered it */
	log_info("sandbox %s: Nomad job %s registered (evaluation %s)", s->id, job, eval_id[0] ? eval_id : "none");
	if (wait_running(d, job, eval_id, deadline, &a, &capacity, err) < 0)
		goto undo;
	if (record_note(d, s->id, "UPDATE sandboxes SET nomad_alloc_id = $2 WHERE id = $1", a.id, err) < 0) {
		sbx_err_ctx(err, "noting the Nomad allocation on the record");
		goto undo;
	}
	/* node-level work is routed to the node agent of the allocation's
	 * client: its node_id is the Nomad node's name (nomad/sbx-node.nomad.hcl).
	 * The placement is the sandbox's own id: the id sbx-init's handshake
	 * names (SBX_SANDBOX_ID in the job) */
	snprintf(out->node_id, sizeof(out->node_id), "%s", a.node_name[0] ? a.node_name : a.node_id);
	snprintf(out->container_id, sizeof(out->container_id), "%s", a.id);
	snprintf(out->placement_id, sizeof(out->placement_id), "%s", s->id);
	log_info("sandbox %s: Nomad allocation %s running on %s", s->id, a.id, out->node_id);
	if (s->volume_id[0] && strcmp(out->node_id, s->volume_node)) {
		sbx_err_set(err, 503, "start_failed", "Nomad placed the task on %s, not on the volume's node %s",
			    out->node_id, s->volume_node);
		goto undo;
	}
	if (adopt(d, s, out->node_id, a.id, key_hex, deadline, err) < 0) {
		forget(d, s, out->node_id);
		goto undo;
	}
	explicit_bzero(key_hex, sizeof(key_hex));
	log_info("sandbox %s: node %s took it over (sbx-init answered)", s->id, out->node_id);
	return 0;
undo:
	if (deregister(d, job, &uerr) < 0)
		log_warnx("sandbox %s: deregistering Nomad job %s failed (%s); the reaper retries", s->id, job, uerr.msg);
undo_var:
	uerr = (sbx_err)SBX_ERR_INIT;
	if (var_delete(d, job, &uerr) < 0)
		log_warnx("sandbox %s: deleting Nomad variable %s failed (%s); the reaper retries", s->id, var, uerr.msg);
undo_mount:
	explicit_bzero(key_hex, sizeof(key_hex));
	/* the volume's node unmounts it (its destroy of the placement); one
	 * that does not answer finds the mount in its volume pass */
	if (s->volume_id[0])
		forget(d, s, s->volume_node);
	return -1;
}

/* The record's Nomad job, "" when it has none (placed by the local driver). */
static int record_job(struct driver *d, const char *id, char *job, size_t sz, sbx_err *err)
{
	cleanup_pgres PGresult *r = NULL;

	job[0] = 0;
	if (!d->db)
		return sbx_err_set(err, 500, "internal", "the Nomad driver has no database connection");
	if (sbx_db_query(d->db, &r, err, "SELECT coalesce(nomad_job_id, '') FROM sandboxes WHERE id = $1", 1, id) < 0)
		return -1;
	if (PQntuples(r) == 1)
		snprintf(job, sz, "%s", PQgetvalue(r, 0, 0));
	return 0;
}

static int nomad_destroy(struct driver *d, const struct sandbox_rec *s, sbx_err *err)
{
	char job[128];

	if (record_job(d, s->id, job, sizeof(job), err) < 0)
		return -1;
	/* a sandbox placed before the switch to Nomad is its node's */
	if (!job[0])
		return driver_local_ops.destroy(d, s, err);
	if (!nomad_job_sandbox(job))
		return sbx_err_set(err, 500, "internal", "the record names a Nomad job that is not ours");
	/* its node agent first, so its ops end with "being destroyed" rather
	 * than with a dead sandbox */
	forget(d, s, s->node_id);
	if (deregister(d, job, err) < 0 || var_delete(d, job, err) < 0)
		return -1;
	log_info("sandbox %s: Nomad job %s deregistered, its variable deleted", s->id, job);
	return 0;
}

struct job_list {
	char (*ids)[64];
	size_t n, cap;
};

static void collect(const char *job_id, void *arg)
{
	struct job_list *l = arg;

	if (!nomad_job_sandbox(job_id) || strlen(job_id) >= 64)
		return; /* not ours: left alone */
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 64;
		void *p = realloc(l->ids, nc * sizeof(*l->ids));
		if (!p)
			return;
		l->ids = p;
		l->cap = nc;
	}
	snprintf(l->ids[l->n++], 64, "%s", job_id);
}

/* a variable nomad/jobs/sbx-<id> (nothing below it) names its job */
static void collect_var(const char *path, void *arg)
{
	if (nomad_var_sandbox(path))
		collect(path + strlen(NOMAD_VAR_PREFIX), arg);
}

/* Lists Nomad's jobs or variables of ours (list: the request, parse: its
 * reader) and removes (rm) those whose sandbox has no live record. */
static int reap_unowned(struct driver *d, const char *list, const char *what,
			int (*parse)(const char *, size_t, void (*)(const char *, void *), void *, sbx_err *),
			void (*fn)(const char *, void *), int (*rm)(struct driver *, const char *, sbx_err *),
			sbx_err *err)
{
	cleanup_nresp struct nresp r = { 0 };
	struct job_list l = { 0 };
	char listing[80];
	int rc = -1;

	snprintf(listing, sizeof(listing), "list the sandbox %ss", what);
	if (nomad_http(d, "GET", list, NULL, 0, &r, err) < 0 || nomad_check(&r, listing, err) < 0 ||
	    parse(r.b.data, r.b.len, fn, &l, err) < 0)
		goto out;
	for (size_t i = 0; i < l.n && !sbx_child_stop; i++) {
		cleanup_pgres PGresult *q = NULL;
		sbx_err derr = SBX_ERR_INIT;

		if (sbx_db_query(d->db, &q, err,
				 "SELECT 1 FROM sandboxes WHERE id = $1 AND status NOT IN ('failed', 'destroyed')", 1,
				 nomad_job_sandbox(l.ids[i])) < 0)
			goto out;
		if (PQntuples(q))
			continue;
		if (rm(d, l.ids[i], &derr) < 0)
			log_warnx("reaper: the Nomad %s of %s has no live record; removing it failed: %s", what, l.ids[i],
				  derr.msg);
		else
			log_info("reaper: the Nomad %s of %s had no live record; removed", what, l.ids[i]);
	}
	rc = 0;
out:
	free(l.ids);
	return rc;
}

/* 1. jobs and channel key variables in our namespace that no live record
 *    owns are deregistered, deleted;
 * 2. live records whose allocation Nomad no longer has (or that died) are
 *    failed with the reason (never replaced: no reschedule). */
static void nomad_reap(struct driver *d)
{
	sbx_err err = SBX_ERR_INIT;
	char scope[400], path[600];

	if (nomad_scope(d, scope, sizeof(scope), &err) < 0)
		goto out;
	snprintf(path, sizeof(path), "/v1/jobs?prefix=" NOMAD_JOB_PREFIX "%s%s", scope[0] ? "&" : "", scope);
	if (reap_unowned(d, path, "job", nomad_jobs_parse, collect, deregister, &err) < 0)
		goto out;
	snprintf(path, sizeof(path), "/v1/vars?prefix=" NOMAD_VAR_PREFIX NOMAD_JOB_PREFIX "%s%s", scope[0] ? "&" : "",
		 scope);
	if (reap_unowned(d, path, "variable", nomad_vars_parse, collect_var, var_delete, &err) < 0)
		goto out;
	{
		cleanup_pgres PGresult *q = NULL;
		if (sbx_db_query(d->db, &q, &err,
				 "SELECT id, nomad_job_id, nomad_alloc_id FROM sandboxes WHERE nomad_alloc_id IS NOT NULL "
				 "AND status IN ('ready', 'pausing', 'paused', 'resuming') ORDER BY created_at LIMIT 500",
				 0) < 0)
			goto out;
		for (int i = 0; i < PQntuples(q) && !sbx_child_stop; i++) {
			cleanup_nresp struct nresp r = { 0 };
			const char *id = PQgetvalue(q, i, 0), *job = PQgetvalue(q, i, 1), *alloc = PQgetvalue(q, i, 2);
			struct nomad_alloc a;
			char why[500];

			if (!nomad_job_sandbox(job))
				continue;
			snprintf(path, sizeof(path), "/v1/job/%s/allocations%s%s", job, scope[0] ? "?" : "", scope);
			if (nomad_http(d, "GET", path, NULL, 0, &r, &err) < 0)
				goto out; /* Nomad unreachable: nothing is judged gone */
			if (r.status == 404)
				snprintf(why, sizeof(why), "its Nomad job %s is gone", job);
			else if (nomad_check(&r, "read a sandbox's allocations", &err) < 0 ||
				 nomad_allocs_parse(r.b.data, r.b.len, alloc, &a, &err) < 0)
				goto out;
			else if (a.phase == NOMAD_ALLOC_NONE)
				snprintf(why, sizeof(why), "its Nomad allocation %.64s is gone", alloc);
			else if (a.phase == NOMAD_ALLOC_DEAD)
				snprintf(why, sizeof(why), "its Nomad allocation %.64s died: %.400s", alloc, a.reason);
			else
				continue;
			sbx_err ferr = SBX_ERR_INIT;
			if (sbx_sandbox_fail(d->db, id, why, &ferr) < 0)
				log_warnx("reaper: sandbox %s: %s", id, ferr.msg);
			else
				log_warnx("sandbox %s: %s; marked failed", id, why);
		}
	}
out:
	if (err.msg[0])
		log_warnx("reaper (nomad): %s", err.msg);
}

const struct driver_ops driver_nomad_ops = {
	.name = "nomad",
	.start = nomad_start,
	.destroy = nomad_destroy,
	.reap = nomad_reap,
};

/* The Nomad driver's JSON: the job it registers and the answers it reads
 * (no I/O here; workers/driver_nomad.c does the HTTP). Every answer from
 * Nomad is outside input: unknown fields are ignored (Nomad adds fields
 * between versions), the ones we use must have the right type, and any
 * text we keep is bounded and cleaned before it reaches a log or a user. */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "chanauth.h"
#include "id.h"
#include "nomad_job.h"

#define INIT_IN_TASK "/.sbx/sbx-init" /* where the local driver binds it too (oci.h) */
#define CHAN_IN_TASK "/alloc/sbx-init.sock" /* Nomad's per-allocation shared dir */

bool nomad_job_id(const char *sandbox_id, char *buf, size_t sz)
{
	int n = snprintf(buf, sz, NOMAD_JOB_PREFIX "%s", sandbox_id);
	return n > 0 && (size_t)n < sz;
}

const char *nomad_job_sandbox(const char *job_id)
{
	size_t pl = strlen(NOMAD_JOB_PREFIX);

	if (strncmp(job_id, NOMAD_JOB_PREFIX, pl) || !sbx_id_valid(job_id + pl))
		return NULL;
	return job_id + pl;
}

int nomad_image_ref(const char *registry_url, const char *template, const char *snapshot, char *buf, size_t sz,
		    sbx_err *err)
{
	const char *h = strstr(registry_url, "://");
	size_t hl;
	int n;

	h = h ? h + 3 : registry_url;
	hl = strlen(h);
	while (hl && h[hl - 1] == '/')
		hl--;
	if (snapshot && snapshot[0]) {
		/* sbx/snapshots/ID@sha256:HEX, as the record's snapshot names it */
		if (strncmp(snapshot, "sbx/snapshots/", 14) || !strstr(snapshot, "@sha256:") ||
		    strspn(snapshot, "abcdefghijklmnopqrstuvwxyz0123456789/@:") != strlen(snapshot))
			return sbx_err_set(err, 500, "bad_snapshot", "snapshot image '%.100s' is malformed", snapshot);
		n = snprintf(buf, sz, "%.*s/%s", (int)hl, h, snapshot);
	} else
		n = snprintf(buf, sz, "%.*s/sbx/templates/%s:latest", (int)hl, h, template);
	if (!hl || n < 0 || (size_t)n >= sz)
		return sbx_err_set(err, 500, "bad_config", "cannot name the image of template %s from registry_url",
				   template);
	return 0;
}

json_t *nomad_job_build(const struct nomad_job_spec *s)
{
	char id[64], net[300], nproc[16];
	json_t *job, *config, *task, *group, *env;

	if (!nomad_job_id(s->sandbox_id, id, sizeof(id)))
		return NULL;
	snprintf(net, sizeof(net), "cni/%s", s->network);
	snprintf(nproc, sizeof(nproc), "%d", s->nproc);
	/* the sandbox's own settings first; ours last so they win */
	env = s->env && json_is_object(s->env) ? json_deep_copy(s->env) : json_object();
	if (!env)
		return NULL;
	json_object_set_new(env, "SBX_SANDBOX_ID", json_string(s->sandbox_id));
	/* the key is never in the job (whoever may read-job would read it):
	 * the template below renders it from the variable, and a key of the
	 * sandbox's own env must not stand in for it */
	json_object_del(env, SBX_CHAN_KEY_ENV);
	json_object_del(env, SBX_CHAN_KEY_FILE_ENV);
	if (s->chan_var)
		/* sbx-init removes the rendered file once it read the key, so
		 * commands inside never find it in /secrets */
		json_object_set_new(env, SBX_CHAN_KEY_FILE_ENV, json_string(NOMAD_KEY_FILE_IN_TASK));
	/* Under runsc the capabilities gate syscalls that never reach the host:
	 * root inside keeps them all, as with the local driver. sbx-init is
	 * PID 1, bound read-only from the client (never from the image). */
	config = json_pack("{s:s, s:s, s:s, s:[s,s,s,s], s:i, s:[s], s:[s], s:[{s:s, s:s, s:s, s:b}]}", "image", s->image,
			   "runtime", "runsc", "command", INIT_IN_TASK, "args", "--channel", CHAN_IN_TASK, "--nproc",
			   nproc, "pids_limit", s->pids_limit, "cap_drop", "ALL", "cap_add", "ALL", "mount", "type",
			   "bind", "source", s->init_path, "target", INIT_IN_TASK, "readonly", 1);
	if (config && s->spare_shell)
		json_array_append_new(json_object_get(config, "args"), json_string("--spare-shell"));
	task = json_pack("{s:s, s:s, s:o, s:o, s:{s:i, s:i, s:i}}", "Name", NOMAD_TASK, "Driver", "docker", "Config",
			 config, "Env", env, "Resources", "CPU", s->cpu, "MemoryMB", s->memory_mb, "MemoryMaxMB",
			 s->memory_mb);
	/* A dead sandbox is never silently replaced: no restart, no
	 * reschedule (a fresh allocation would be a new computer wearing the
	 * old one's name). */
	group = json_pack("{s:s, s:i, s:{s:i, s:s}, s:{s:i, s:b}, s:[{s:s}], s:[o]}", "Name", NOMAD_GROUP, "Count", 1,
			  "RestartPolicy", "Attempts", 0, "Mode", "fail", "ReschedulePolicy", "Attempts", 0, "Unlimited",
			  0, "Networks", "Mode", net, "Tasks", task);
	if (task && s->chan_var) {
		/* Nomad's template runner reads the variable with the job's
		 * workload identity (its implicit policy covers nomad/jobs/<job
		 * id>) and hands SBX_CHANNEL_KEY to the task's environment
		 * before it starts. noop on change: the key never changes, and a
		 * restart would be a dead sandbox (no restarts). */
		char tmpl[400];
		snprintf(tmpl, sizeof(tmpl), "{{ with nomadVar \"%s\" }}SBX_CHANNEL_KEY={{ ." NOMAD_VAR_KEY_ITEM
			 " }}{{ end }}\n", s->chan_var);
		json_object_set_new(task, "Templates",
				    json_pack("[{s:s, s:s, s:b, s:s, s:s}]", "EmbeddedTmpl", tmpl, "DestPath",
					      NOMAD_KEY_FILE, "Envvars", 1, "ChangeMode", "noop", "Perms", "0400"));
	}
	if (group && s->volume_node && s->volume_source && s->volume_target) {
		/* the volume is that node's image: the task runs there or nowhere */
		json_object_set_new(group, "Constraints",
				    json_pack("[{s:s, s:s, s:s}]", "LTarget", "${node.unique.name}", "RTarget",
					      s->volume_node, "Operand", "="));
		json_array_append_new(json_object_get(config, "mount"),
				      json_pack("{s:s, s:s, s:s, s:b}", "type", "bind", "source", s->volume_source,
						"target", s->volume_target, "readonly", 0));
	}
	job = json_pack("{s:{s:s, s:s, s:s, s:[s], s:s, s:{s:s}, s:[o]}}", "Job", "ID", id, "Name", id, "Type", "service",
			"Datacenters", "*", "NodePool", s->node_pool, "Meta", "sbx_sandbox_id", s->sandbox_id,
			"TaskGroups", group);
	if (!job)
		return NULL;
	if (s->namespace_ && s->namespace_[0])
		json_object_set_new(json_object_get(job, "Job"), "Namespace", json_string(s->namespace_));
	if (s->region && s->region[0])
		json_object_set_new(json_object_get(job, "Job"), "Region", json_string(s->region));
	return job;
}

bool nomad_var_path(const char *job_id, char *buf, size_t sz)
{
	int n = snprintf(buf, sz, NOMAD_VAR_PREFIX "%s", job_id);
	return n > 0 && (size_t)n < sz;
}

const char *nomad_var_sandbox(const char *path)
{
	size_t pl = strlen(NOMAD_VAR_PREFIX);

	if (strncmp(path, NOMAD_VAR_PREFIX, pl))
		return NULL;
	return nomad_job_sandbox(path + pl);
}

json_t *nomad_var_build(const char *namespace_, const char *path, const char *chan_key)
{
	json_t *v = json_pack("{s:s, s:{s:s}}", "Path", path, "Items", NOMAD_VAR_KEY_ITEM, chan_key);

	if (v && namespace_ && namespace_[0])
		json_object_set_new(v, "Namespace", json_string(namespace_));
	return v;
}

/* Copies printable ASCII only, collapsing runs of anything else into one
 * space: a reason from Nomad goes into logs and API answers. */
static void clean_copy(char *buf, size_t sz, const char *s, size_t len)
{
	size_t o = 0;
	bool space = false;

	if (!sz)
		return;
	for (size_t i = 0; i < len && s[i] && o + 1 < sz; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c > 0x7e) {
			space = o > 0;
			continue;
		}
		if (space && o + 2 < sz)
			buf[o++] = ' ';
		space = false;
		buf[o++] = (char)c;
	}
	while (o && buf[o - 1] == ' ')
		o--;
	buf[o] = 0;
}

void nomad_error_text(const char *body, size_t len, char *buf, size_t sz)
{
	clean_copy(buf, sz, body ? body : "", body ? len : 0);
	if (sz && !buf[0])
		snprintf(buf, sz, "no reason given");
}

static json_t *load(const char *body, size_t len, sbx_err *err)
{
	json_error_t jerr;
	json_t *j = json_loadb(body, len, 0, &jerr);

	if (!j)
		sbx_err_set(err, 503, "bad_nomad_reply", "Nomad sent a malformed answer: %s", jerr.text);
	return j;
}

static const char *str_of(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_string(v) ? json_string_value(v) : "";
}

static int bad(sbx_err *err, const char *what)
{
	return sbx_err_set(err, 503, "bad_nomad_reply", "Nomad sent a malformed answer: %s", what);
}

/* why a dead task died: its last event with a message */
static void task_reason(json_t *ts, char *buf, size_t sz)
{
	json_t *events = json_object_get(ts, "Events"), *e;
	size_t i;

	buf[0] = 0;
	if (!json_is_array(events))
		return;
	for (i = json_array_size(events); i-- > 0;) {
		const char *m;
		e = json_array_get(events, i);
		m = str_of(e, "DisplayMessage");
		if (!m[0])
			m = str_of(e, "DriverError");
		if (!m[0])
			m = str_of(e, "Message");
		if (m[0]) {
			char t[64];
			clean_copy(t, sizeof(t), str_of(e, "Type"), 63);
			if (t[0] && strcmp(t, m)) {
				char both[400];
				snprintf(both, sizeof(both), "%s: %s", t, m);
				clean_copy(buf, sz, both, sizeof(both));
			} else
				clean_copy(buf, sz, m, strlen(m));
			return;
		}
	}
}

int nomad_allocs_parse(const char *body, size_t len, const char *alloc_id, struct nomad_alloc *out, sbx_err *err)
{
	json_t *arr = load(body, len, err), *a, *best = NULL, *ts, *t;
	json_int_t best_idx = -1;
	size_t i;
	const char *cs;

	memset(out, 0, sizeof(*out));
	if (!arr)
		return -1;
	if (!json_is_array(arr)) {
		json_decref(arr);
		return bad(err, "the allocations are not a list");
	}
	json_array_foreach(arr, i, a) {
		json_t *ci = json_object_get(a, "CreateIndex");
		if (!json_is_object(a) || !json_is_string(json_object_get(a, "ID")) ||
		    !json_is_string(json_object_get(a, "ClientStatus"))) {
			json_decref(arr);
			return bad(err, "an allocation without ID or ClientStatus");
		}
		if (alloc_id && alloc_id[0]) {
			if (!strcmp(str_of(a, "ID"), alloc_id)) {
				best = a;
				break;
			}
			continue;
		}
		if (!best || (json_is_integer(ci) && json_integer_value(ci) > best_idx)) {
			best = a;
			best_idx = json_is_integer(ci) ? json_integer_value(ci) : -1;
		}
	}
	if (!best) {
		json_decref(arr);
		return 0;
	}
	clean_copy(out->id, sizeof(out->id), str_of(best, "ID"), 63);
	clean_copy(out->node_id, sizeof(out->node_id), str_of(best, "NodeID"), 63);
	clean_copy(out->node_name, sizeof(out->node_name), str_of(best, "NodeName"), 255);
	cs = str_of(best, "ClientStatus");
	clean_copy(out->client_status, sizeof(out->client_status), cs, 31);
	ts = json_object_get(best, "TaskStates");
	t = json_is_object(ts) ? json_object_get(ts, NOMAD_TASK) : NULL;
	if (!strcmp(cs, "pending"))
		out->phase = NOMAD_ALLOC_PENDING;
	else if (!strcmp(cs, "running"))
		/* the allocation runs once its task does */
		out->phase = json_is_object(t) && !strcmp(str_of(t, "State"), "running") ? NOMAD_ALLOC_RUNNING
											 : NOMAD_ALLOC_PENDING;
	else
		out->phase = NOMAD_ALLOC_DEAD; /* complete, failed, lost, unknown */
	if (json_is_object(t) && !strcmp(str_of(t, "State"), "dead"))
		out->phase = NOMAD_ALLOC_DEAD;
	if (!strcmp(str_of(best, "DesiredStatus"), "stop") || !strcmp(str_of(best, "DesiredStatus"), "evict"))
		out->phase = NOMAD_ALLOC_DEAD;
	if (out->phase == NOMAD_ALLOC_DEAD) {
		/* a task that died says why; a running task's last event is not
		 * why its allocation was lost */
		if (json_is_object(t) && !strcmp(str_of(t, "State"), "dead"))
			task_reason(t, out->reason, sizeof(out->reason));
		if (!out->reason[0]) {
			const char *d = str_of(best, "ClientDescription");
			clean_copy(out->reason, sizeof(out->reason), d, strlen(d));
		}
		if (!out->reason[0])
			snprintf(out->reason, sizeof(out->reason), "allocation %s", out->client_status);
	}
	json_decref(arr);
	return 0;
}

/* "no node could place it: 3 nodes evaluated, 2 filtered, 1 exhausted (memory)" */
static void placement_reason(json_t *failed, char *buf, size_t sz)
{
	const char *g;
	json_t *m;

	json_object_foreach(failed, g, m) {
		char dims[200] = "", cons[200] = "";
		const char *k;
		json_t *v;
		size_t o = 0;
		json_t *ne = json_object_get(m, "NodesEvaluated"), *nf = json_object_get(m, "NodesFiltered"),
		       *nx = json_object_get(m, "NodesExhausted");

		json_object_foreach(json_object_get(m, "DimensionExhausted"), k, v) {
			int n = snprintf(dims + o, sizeof(dims) - o, "%s%s", o ? ", " : "", k);
			if (n < 0 || (size_t)n >= sizeof(dims) - o)
				break;
			o += (size_t)n;
		}
		o = 0;
		json_object_foreach(json_object_get(m, "ConstraintFiltered"), k, v) {
			int n = snprintf(cons + o, sizeof(cons) - o, "%s%s", o ? ", " : "", k);
			if (n < 0 || (size_t)n >= sizeof(cons) - o)
				break;
			o += (size_t)n;
		}
		{
			char raw[800];
			snprintf(raw, sizeof(raw),
				 "no node could place it: %lld nodes evaluated, %lld filtered%s%s%s, %lld exhausted%s%s%s",
				 json_is_integer(ne) ? (long long)json_integer_value(ne) : 0LL,
				 json_is_integer(nf) ? (long long)json_integer_value(nf) : 0LL, cons[0] ? " (" : "", cons,
				 cons[0] ? ")" : "", json_is_integer(nx) ? (long long)json_integer_value(nx) : 0LL,
				 dims[0] ? " (" : "", dims, dims[0] ? ")" : "");
			clean_copy(buf, sz, raw, sizeof(raw));
		}
		return;
	}
}

int nomad_eval_parse(const char *body, size_t len, struct nomad_eval *out, sbx_err *err)
{
	json_t *e = load(body, len, err), *failed;
	const char *st;

	memset(out, 0, sizeof(*out));
	if (!e)
		return -1;
	if (!json_is_object(e) || !json_is_string(json_object_get(e, "Status"))) {
		json_decref(e);
		return bad(err, "an evaluation without Status");
	}
	st = str_of(e, "Status");
	failed = json_object_get(e, "FailedTGAllocs");
	if (json_is_object(failed) && json_object_size(failed)) {
		/* Nomad completes the evaluation and leaves a blocked one behind:
		 * for a sandbox, waiting for capacity is a failed create */
		out->phase = NOMAD_EVAL_FAILED;
		placement_reason(failed, out->reason, sizeof(out->reason));
	} else if (!strcmp(st, "complete")) {
		out->phase = NOMAD_EVAL_PLACED;
	} else if (!strcmp(st, "pending")) {
		out->phase = NOMAD_EVAL_PENDING;
	} else {
		const char *d = str_of(e, "StatusDescription");
		char raw[420];
		out->phase = NOMAD_EVAL_FAILED;
		snprintf(raw, sizeof(raw), "evaluation %.40s%s%.360s", st, d[0] ? ": " : "", d);
		clean_copy(out->reason, sizeof(out->reason), raw, sizeof(raw));
	}
	json_decref(e);
	return 0;
}

int nomad_register_parse(const char *body, size_t len, char *eval_id, size_t sz, sbx_err *err)
{
	json_t *r = load(body, len, err);

	if (!r)
		return -1;
	if (!json_is_object(r)) {
		json_decref(r);
		return bad(err, "the register answer is not an object");
	}
	clean_copy(eval_id, sz, str_of(r, "EvalID"), sz);
	json_decref(r);
	return 0;
}

/* A list answer (jobs, variables): fn gets every entry's field, once all
 * entries were found to have it. */
static int list_parse(const char *body, size_t len, const char *field, const char *what,
		      void (*fn)(const char *v, void *arg), void *arg, sbx_err *err)
{
	json_t *arr = load(body, len, err), *j;
	size_t i;
	int n = 0;

	if (!arr)
		return -1;
	if (!json_is_array(arr)) {
		json_decref(arr);
		return bad(err, what);
	}
	json_array_foreach(arr, i, j) {
		if (!json_is_string(json_object_get(j, field))) {
			json_decref(arr);
			return bad(err, what);
		}
	}
	json_array_foreach(arr, i, j) {
		fn(str_of(j, field), arg);
		n++;
	}
	json_decref(arr);
	return n;
}

int nomad_jobs_parse(const char *body, size_t len, void (*fn)(const char *job_id, void *arg), void *arg,
		     sbx_err *err)
{
	return list_parse(body, len, "ID", "the job list is not a list of jobs with an ID", fn, arg, err);
}

int nomad_vars_parse(const char *body, size_t len, void (*fn)(const char *path, void *arg), void *arg,
		     sbx_err *err)
{
	return list_parse(body, len, "Path", "the variable list is not a list of variables with a Path", fn, arg,
			  err);
}

int nomad_status_check(long status, const char *body, size_t len, const char *what, sbx_err *err)
{
	char why[300];

	if (status >= 200 && status < 300)
		return 0;
	nomad_error_text(body, len, why, sizeof(why));
	if (status == 403)
		return sbx_err_set(err, 503, "nomad_denied",
				   "Nomad refused to %s: permission denied (403: %s); the ACL token's policy must allow it",
				   what, why);
	if (status == 400)
		return sbx_err_set(err, 503, "nomad_invalid", "Nomad refused to %s as invalid (400: %s)", what, why);
	return sbx_err_set(err, 503, "nomad_error", "Nomad failed to %s (%ld: %s)", what, status, why);
}

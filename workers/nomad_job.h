/* What the Nomad driver sends to Nomad and reads back, without any I/O, so
 * it can be unit-tested (t/unit/nomad_job_test.c) and fuzzed
 * (fuzz/fuzz_nomad.c). Field names follow Nomad's JSON job specification
 * and its HTTP API (jobs, allocations, evaluations); doc/nomad.md. */
#ifndef SBX_WORKER_NOMAD_JOB_H
#define SBX_WORKER_NOMAD_JOB_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include "err.h"

#define NOMAD_JOB_PREFIX "sbx-"  /* job id: sbx-<sandbox id> */
#define NOMAD_GROUP      "sandbox"
#define NOMAD_TASK       "sandbox"

struct nomad_job_spec {
	const char *sandbox_id;
	const char *namespace_; /* "" none */
	const char *region;     /* "" none: the agent's own */
	const char *node_pool;
	const char *network;    /* CNI network name: mode cni/<network> */
	const char *image;      /* registry host/sbx/templates/NAME:latest */
	const char *init_path;  /* sbx-init on the client, bound read-only */
	int cpu, memory_mb;
	int pids_limit, nproc;
	bool spare_shell; /* sbx-init --spare-shell (setting exec_spare_shell) */
	json_t *env; /* {"K":"V"}, borrowed; may be NULL */
	/* the Nomad Variable holding sbx-init's channel key (nomad_var_path):
	 * the task gets a template rendering it as SBX_CHANNEL_KEY (the key is
	 * never in the job itself); NULL: no key */
	const char *chan_var;
	/* a volume (nomad_vol.h): the task binds volume_source, the host
	 * directory the volume's node mounted it on, at volume_target, and the
	 * group is pinned to that node (its ${node.unique.name}); NULL: none */
	const char *volume_node, *volume_source, *volume_target;
};

#define NOMAD_VAR_PREFIX   "nomad/jobs/" /* a job's workload identity may read nomad/jobs/<job id> */
#define NOMAD_VAR_KEY_ITEM "chan_key"    /* the variable's one item: the key, hex */
#define NOMAD_KEY_FILE     "secrets/sbx-channel.env" /* the template's file, in the task's directory */
#define NOMAD_KEY_FILE_IN_TASK "/secrets/sbx-channel.env" /* the same, as the task sees it */

/* {"Job": {...}} for POST /v1/jobs; NULL only when out of memory. */
json_t *nomad_job_build(const struct nomad_job_spec *s);
/* "sbx-<id>" into buf; false when it does not fit. */
bool nomad_job_id(const char *sandbox_id, char *buf, size_t sz);
/* The sandbox id of a job id of ours, or NULL for anyone else's job. */
const char *nomad_job_sandbox(const char *job_id);
/* "nomad/jobs/<job id>": the variable a job's own tasks may read (Nomad's
 * implicit workload-identity policy); false when it does not fit. */
bool nomad_var_path(const char *job_id, char *buf, size_t sz);
/* The sandbox id of a variable path of ours (nomad/jobs/sbx-<id>, nothing
 * below it), or NULL for any other variable. */
const char *nomad_var_sandbox(const char *path);
/* {"Namespace", "Path", "Items": {"chan_key": KEY}} for PUT /v1/var/:path;
 * namespace_ may be "" (the agent's default). NULL only when out of memory. */
json_t *nomad_var_build(const char *namespace_, const char *path, const char *chan_key);
/* The image reference of a template (REGISTRY/sbx/templates/T:latest), or of
 * the snapshot a sandbox starts from when snapshot is not empty
 * (REGISTRY/sbx/snapshots/ID@sha256:HEX): registry_url without its scheme. */
int nomad_image_ref(const char *registry_url, const char *template, const char *snapshot, char *buf, size_t sz,
		    sbx_err *err);

/* The allocation of a sandbox's job, as the driver cares about it. */
enum nomad_alloc_phase { NOMAD_ALLOC_NONE, NOMAD_ALLOC_PENDING, NOMAD_ALLOC_RUNNING, NOMAD_ALLOC_DEAD };

struct nomad_alloc {
	enum nomad_alloc_phase phase;
	char id[64];
	char node_id[64];
	char node_name[256];
	char client_status[32];
	char reason[400]; /* why it died: the task's last event, or the client's description */
};

/* Reads the answer of GET /v1/job/:id/allocations (a JSON array). With
 * alloc_id non-empty, only that allocation counts; otherwise the newest
 * (highest CreateIndex). out->phase is NONE when there is none. Malformed
 * answers fail (503 bad_nomad_reply). */
int nomad_allocs_parse(const char *body, size_t len, const char *alloc_id, struct nomad_alloc *out, sbx_err *err);

enum nomad_eval_phase { NOMAD_EVAL_PENDING, NOMAD_EVAL_PLACED, NOMAD_EVAL_FAILED };

struct nomad_eval {
	enum nomad_eval_phase phase;
	char reason[400]; /* placement failure, blocked, or the failed status' description */
};

/* Reads the answer of GET /v1/evaluation/:id. */
int nomad_eval_parse(const char *body, size_t len, struct nomad_eval *out, sbx_err *err);

/* Reads the answer of POST /v1/jobs: its EvalID (may be empty). */
int nomad_register_parse(const char *body, size_t len, char *eval_id, size_t sz, sbx_err *err);

/* Reads the answer of GET /v1/jobs: calls fn for every job id; returns
 * the count, or -1 on a malformed answer. */
int nomad_jobs_parse(const char *body, size_t len, void (*fn)(const char *job_id, void *arg), void *arg,
		     sbx_err *err);

/* Reads the answer of GET /v1/vars: calls fn for every variable's Path;
 * returns the count, or -1 on a malformed answer. */
int nomad_vars_parse(const char *body, size_t len, void (*fn)(const char *path, void *arg), void *arg,
		     sbx_err *err);

/* Nomad's error answer (plain text, sometimes JSON) as one clean line:
 * printable ASCII, at most sz-1 bytes. */
void nomad_error_text(const char *body, size_t len, char *buf, size_t sz);

/* An HTTP status other than 2xx as a 503 saying what was asked and what
 * Nomad answered (403: the ACL policy; 400: the job is invalid; others). */
int nomad_status_check(long status, const char *body, size_t len, const char *what, sbx_err *err);

#endif

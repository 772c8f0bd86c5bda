/* Proves: the Nomad job the driver registers has the shape issue 14 and
 * doc/nomad.md spell out (service, namespace, node pool, region only when
 * set, one group of count 1, no restart and no reschedule, network mode
 * cni/<net>, one docker task with runtime runsc, the registry's image,
 * sbx-init bound read-only as the command, pids_limit, cap_drop and cap_add
 * ALL, CPU/MemoryMB/MemoryMaxMB from the specs, the sandbox's env with its
 * id added; no channel key in the Env, a template rendering it from the
 * job's Nomad Variable instead); variable paths, bodies and lists; job ids round-trip and other jobs are not ours; the image
 * reference drops the registry URL's scheme; Nomad's answers parse
 * (allocations: newest or a named one, running only when the task runs,
 * a dead task's reason from its last event; evaluations: placed, pending,
 * placement failure summarised, failed with its description; the job list
 * and the register answer), malformed answers are 503 bad_nomad_reply,
 * error bodies are cleaned into one printable line, and HTTP statuses map
 * to 503s that say what was asked and what Nomad answered. */
#include "config.h"
#include <stdlib.h>
#include <string.h>
#include "nomad_job.h"
#include "../tap.h"

#define SID "0123456789abcdef01234567"
#define SHA "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static sbx_err err;

static json_t *path(json_t *j, const char *p)
{
	char buf[256], *save = NULL, *tok;

	snprintf(buf, sizeof(buf), "%s", p);
	for (tok = strtok_r(buf, ".", &save); tok && j; tok = strtok_r(NULL, ".", &save)) {
		if (tok[0] >= '0' && tok[0] <= '9')
			j = json_array_get(j, (size_t)atoi(tok));
		else
			j = json_object_get(j, tok);
	}
	return j;
}

static const char *s_at(json_t *j, const char *p)
{
	json_t *v = path(j, p);
	return json_is_string(v) ? json_string_value(v) : "(none)";
}

static long long i_at(json_t *j, const char *p)
{
	json_t *v = path(j, p);
	return json_is_integer(v) ? (long long)json_integer_value(v) : -999;
}

static void job_shape(void)
{
	json_t *env = json_pack("{s:s}", "FOO", "bar");
	struct nomad_job_spec s = { .sandbox_id = SID, .namespace_ = "sandboxes", .region = "", .node_pool = "sandbox",
				    .network = "sbx", .image = "reg:5000/sbx/templates/debian-12:latest",
				    .init_path = "/usr/libexec/sbx/sbx-init", .cpu = 1000, .memory_mb = 512,
				    .pids_limit = 16384, .nproc = 2048, .env = env };
	json_t *j = nomad_job_build(&s), *t;

	ok(j != NULL, "a job is built");
	is_str(s_at(j, "Job.ID"), "sbx-" SID, "job id is sbx-<sandbox id>");
	is_str(s_at(j, "Job.Type"), "service", "type service");
	is_str(s_at(j, "Job.Namespace"), "sandboxes", "namespace from the settings");
	ok(path(j, "Job.Region") == NULL, "no Region when none is set (the agent's own)");
	is_str(s_at(j, "Job.NodePool"), "sandbox", "node pool from the settings");
	is_int(json_array_size(path(j, "Job.TaskGroups")), 1, "one task group");
	is_int(i_at(j, "Job.TaskGroups.0.Count"), 1, "count 1");
	is_int(i_at(j, "Job.TaskGroups.0.RestartPolicy.Attempts"), 0, "restart attempts 0");
	is_str(s_at(j, "Job.TaskGroups.0.RestartPolicy.Mode"), "fail", "restart mode fail");
	is_int(i_at(j, "Job.TaskGroups.0.ReschedulePolicy.Attempts"), 0, "reschedule attempts 0");
	ok(json_is_false(path(j, "Job.TaskGroups.0.ReschedulePolicy.Unlimited")), "reschedule not unlimited");
	is_str(s_at(j, "Job.TaskGroups.0.Networks.0.Mode"), "cni/sbx", "network mode cni/<net>");
	is_int(json_array_size(path(j, "Job.TaskGroups.0.Tasks")), 1, "one task");
	t = path(j, "Job.TaskGroups.0.Tasks.0");
	is_str(s_at(t, "Driver"), "docker", "docker driver");
	is_str(s_at(t, "Config.runtime"), "runsc", "runtime runsc");
	is_str(s_at(t, "Config.image"), "reg:5000/sbx/templates/debian-12:latest", "the template's image");
	is_str(s_at(t, "Config.command"), "/.sbx/sbx-init", "sbx-init is the command");
	is_str(s_at(t, "Config.args.3"), "2048", "sbx-init gets the sandbox's process limit");
	ok(path(t, "Config.args.4") == NULL, "no --spare-shell unless asked");
	is_str(s_at(t, "Config.mount.0.source"), "/usr/libexec/sbx/sbx-init", "sbx-init bound from the client");
	is_str(s_at(t, "Config.mount.0.target"), "/.sbx/sbx-init", "at the path the command names");
	ok(json_is_true(path(t, "Config.mount.0.readonly")), "read-only");
	is_int(i_at(t, "Config.pids_limit"), 16384, "pids_limit");
	is_str(s_at(t, "Config.cap_drop.0"), "ALL", "cap_drop ALL");
	is_str(s_at(t, "Config.cap_add.0"), "ALL", "cap_add ALL");
	is_int(i_at(t, "Resources.CPU"), 1000, "CPU from the specs");
	is_int(i_at(t, "Resources.MemoryMB"), 512, "MemoryMB from the specs");
	is_int(i_at(t, "Resources.MemoryMaxMB"), 512, "MemoryMaxMB: the memory is a hard limit");
	is_str(s_at(t, "Env.FOO"), "bar", "the sandbox's env");
	is_str(s_at(t, "Env.SBX_SANDBOX_ID"), SID, "and its id");
	is_str(s_at(j, "Job.Meta.sbx_sandbox_id"), SID, "the sandbox id in the job's meta");
	ok(path(j, "Job.TaskGroups.0.Constraints") == NULL && path(t, "Config.mount.1") == NULL,
	   "no volume: no constraint, sbx-init's the only mount");
	json_decref(j);
	/* a volume: pinned to its node, the host directory bound inside */
	s.volume_node = "client-7";
	s.volume_source = "/var/lib/sbx/nomad-volumes/" SID;
	s.volume_target = "/workspace";
	j = nomad_job_build(&s);
	is_str(s_at(j, "Job.TaskGroups.0.Constraints.0.LTarget"), "${node.unique.name}",
	       "a volume: the group is constrained on the node's name");
	is_str(s_at(j, "Job.TaskGroups.0.Constraints.0.Operand"), "=", "...equal");
	is_str(s_at(j, "Job.TaskGroups.0.Constraints.0.RTarget"), "client-7", "...to the volume's node");
	t = path(j, "Job.TaskGroups.0.Tasks.0");
	is_str(s_at(t, "Config.mount.1.type"), "bind", "the task binds the volume");
	is_str(s_at(t, "Config.mount.1.source"), "/var/lib/sbx/nomad-volumes/" SID, "...from the node's mount of it");
	is_str(s_at(t, "Config.mount.1.target"), "/workspace", "...at its mount path");
	ok(json_is_false(path(t, "Config.mount.1.readonly")), "...writable");
	is_str(s_at(t, "Config.mount.0.target"), "/.sbx/sbx-init", "sbx-init's bind stays the first");
	json_decref(j);
	s.volume_node = s.volume_source = s.volume_target = NULL;
	s.region = "eu";
	s.namespace_ = "";
	s.env = NULL;
	j = nomad_job_build(&s);
	is_str(s_at(j, "Job.Region"), "eu", "Region when set");
	ok(path(j, "Job.Namespace") == NULL, "no Namespace when none is set");
	is_str(s_at(j, "Job.TaskGroups.0.Tasks.0.Env.SBX_SANDBOX_ID"), SID, "env without the sandbox's own");
	ok(path(j, "Job.TaskGroups.0.Tasks.0.Env.SBX_CHANNEL_KEY") == NULL, "no channel key when none is given");
	ok(path(j, "Job.TaskGroups.0.Tasks.0.Templates") == NULL, "no template when there is no key");
	json_decref(j);
	/* the channel key reaches sbx-init through a template reading the
	 * job's Nomad Variable: never in the job, not even one the sandbox set */
	s.chan_var = "nomad/jobs/sbx-" SID;
	s.env = json_pack("{s:s, s:s}", "SBX_CHANNEL_KEY", "mine", "SBX_CHANNEL_KEY_FILE", "/etc/passwd");
	j = nomad_job_build(&s);
	t = path(j, "Job.TaskGroups.0.Tasks.0");
	ok(path(t, "Env.SBX_CHANNEL_KEY") == NULL, "no SBX_CHANNEL_KEY in the task's Env (not even the sandbox's own)");
	is_str(s_at(t, "Env.SBX_CHANNEL_KEY_FILE"), "/secrets/sbx-channel.env",
	       "sbx-init is told which rendered file to remove (ours, over the sandbox's)");
	is_int(json_array_size(path(t, "Templates")), 1, "one template");
	is_str(s_at(t, "Templates.0.EmbeddedTmpl"),
	       "{{ with nomadVar \"nomad/jobs/sbx-" SID "\" }}SBX_CHANNEL_KEY={{ .chan_key }}{{ end }}\n",
	       "it renders SBX_CHANNEL_KEY from the job's variable");
	is_str(s_at(t, "Templates.0.DestPath"), "secrets/sbx-channel.env", "into the task's secrets directory");
	ok(json_is_true(path(t, "Templates.0.Envvars")), "read back as the task's environment");
	is_str(s_at(t, "Templates.0.ChangeMode"), "noop", "no restart on a change (a restart is a dead sandbox)");
	is_str(s_at(t, "Templates.0.Perms"), "0400", "readable by root only");
	{
		char *text = json_dumps(j, JSON_COMPACT);
		ok(text && !strstr(text, "mine"), "the sandbox's own key is nowhere in the job");
		free(text);
	}
	json_decref(j);
	json_decref(s.env);
	s.env = NULL;
	s.chan_var = NULL;
	json_decref(env);
}

static void n_var(const char *p, void *arg)
{
	int *n = arg;
	(*n)++;
	(void)p;
}

static void vars(void)
{
	char buf[128];
	json_t *v;
	int n = 0;
	const char *list = "[{\"Namespace\":\"sandboxes\",\"Path\":\"nomad/jobs/sbx-" SID "\",\"CreateIndex\":3},"
			   "{\"Namespace\":\"sandboxes\",\"Path\":\"app/db\"}]";

	ok(nomad_var_path("sbx-" SID, buf, sizeof(buf)) && !strcmp(buf, "nomad/jobs/sbx-" SID),
	   "the variable of a job: nomad/jobs/<job id>");
	ok(!nomad_var_path("sbx-" SID, buf, 20), "a variable path that does not fit is refused");
	is_str(nomad_var_sandbox("nomad/jobs/sbx-" SID), SID, "our variable names its sandbox");
	ok(nomad_var_sandbox("nomad/jobs/sbx-" SID "/sandbox") == NULL, "a variable below ours is not ours");
	ok(nomad_var_sandbox("nomad/jobs/web") == NULL, "another job's variable is not ours");
	ok(nomad_var_sandbox("sbx-" SID) == NULL, "a variable outside nomad/jobs is not ours");
	v = nomad_var_build("sandboxes", "nomad/jobs/sbx-" SID, "00ff");
	is_str(s_at(v, "Namespace"), "sandboxes", "the variable: its namespace");
	is_str(s_at(v, "Path"), "nomad/jobs/sbx-" SID, "its path");
	is_str(s_at(v, "Items.chan_key"), "00ff", "the key as its one item");
	is_int(json_object_size(path(v, "Items")), 1, "and nothing else");
	json_decref(v);
	v = nomad_var_build("", "p", "k");
	ok(path(v, "Namespace") == NULL, "no Namespace when none is set");
	json_decref(v);
	is_int(nomad_vars_parse(list, strlen(list), n_var, &n, &err), 2, "the variable list parses");
	is_int(n, 2, "every Path is handed on");
	ok(nomad_vars_parse("[{\"Namespace\":\"x\"}]", 17, n_var, &n, &err) < 0 && !strcmp(err.code, "bad_nomad_reply"),
	   "a variable without Path is a malformed answer");
	ok(nomad_vars_parse("{}", 2, n_var, &n, &err) < 0, "a list that is not a list too");
}

static void ids(void)
{
	char buf[64], img[128];

	ok(nomad_job_id(SID, buf, sizeof(buf)) && !strcmp(buf, "sbx-" SID), "job id");
	ok(!nomad_job_id(SID, buf, 10), "a job id that does not fit is refused");
	is_str(nomad_job_sandbox("sbx-" SID), SID, "our job names its sandbox");
	ok(nomad_job_sandbox("sbx-xyz") == NULL, "a job with a malformed id is not ours");
	ok(nomad_job_sandbox("web-" SID) == NULL, "someone else's job is not ours");
	ok(nomad_image_ref("http://127.0.0.1:5000/", "debian-12", NULL, img, sizeof(img), &err) == 0 &&
		   !strcmp(img, "127.0.0.1:5000/sbx/templates/debian-12:latest"),
	   "image reference without the scheme");
	ok(nomad_image_ref("https://", "x", "", img, sizeof(img), &err) < 0, "a registry URL without a host is refused");
	ok(nomad_image_ref("http://127.0.0.1:5000", "debian-12", "sbx/snapshots/" SID "@sha256:" SHA, img, sizeof(img),
			   &err) == 0 &&
		   !strcmp(img, "127.0.0.1:5000/sbx/snapshots/" SID "@sha256:" SHA),
	   "a sandbox from a snapshot: the snapshot's image, by digest");
	ok(nomad_image_ref("http://127.0.0.1:5000", "debian-12", "sbx/templates/x:latest", img, sizeof(img), &err) < 0,
	   "a snapshot image outside sbx/snapshots/ is refused");
	ok(nomad_image_ref("http://127.0.0.1:5000", "debian-12", "sbx/snapshots/a b@sha256:0", img, sizeof(img),
			   &err) < 0,
	   "a snapshot image with other characters is refused");
}

#define ALLOC(id, ci, cs, ts, extra)                                                                        \
	"{\"ID\":\"" id "\",\"NodeID\":\"n1\",\"NodeName\":\"client-a\",\"CreateIndex\":" #ci ",\"ClientStatus\":\"" cs \
	"\",\"ClientDescription\":\"node down\",\"DesiredStatus\":\"run\",\"TaskStates\":{\"sandbox\":{\"State\":\"" ts \
	"\"" extra "}}}"

static void allocs(void)
{
	struct nomad_alloc a;
	const char *two = "[" ALLOC("old", 5, "failed", "dead", ) "," ALLOC("new", 9, "running", "running", ) "]";
	const char *dead = "[" ALLOC("a1", 3, "failed", "dead",
				     ",\"Events\":[{\"Type\":\"Received\",\"DisplayMessage\":\"Task received\"},"
				     "{\"Type\":\"Driver Failure\",\"DisplayMessage\":\"runtime \\\"runsc\\\" is not allowed\\n\"}]") "]";

	ok(nomad_allocs_parse("[]", 2, NULL, &a, &err) == 0 && a.phase == NOMAD_ALLOC_NONE, "no allocation");
	ok(nomad_allocs_parse(two, strlen(two), NULL, &a, &err) == 0 && a.phase == NOMAD_ALLOC_RUNNING &&
		   !strcmp(a.id, "new") && !strcmp(a.node_name, "client-a"),
	   "the newest allocation counts");
	ok(nomad_allocs_parse(two, strlen(two), "old", &a, &err) == 0 && a.phase == NOMAD_ALLOC_DEAD,
	   "a named allocation counts");
	ok(nomad_allocs_parse(two, strlen(two), "gone", &a, &err) == 0 && a.phase == NOMAD_ALLOC_NONE,
	   "a named allocation that is not there is none");
	{
		const char *p = "[" ALLOC("p", 1, "running", "pending", ) "]";
		ok(nomad_allocs_parse(p, strlen(p), NULL, &a, &err) == 0 && a.phase == NOMAD_ALLOC_PENDING,
		   "running allocation with a pending task is not ready");
	}
	ok(nomad_allocs_parse(dead, strlen(dead), NULL, &a, &err) == 0 && a.phase == NOMAD_ALLOC_DEAD &&
		   !strcmp(a.reason, "Driver Failure: runtime \"runsc\" is not allowed"),
	   "a dead task's reason is its last event (cleaned)");
	diag("reason: %s", a.reason);
	{
		const char *l = "[" ALLOC("x", 1, "lost", "running",
					  ",\"Events\":[{\"Type\":\"Started\",\"DisplayMessage\":\"Task started\"}]")
				"]";
		ok(nomad_allocs_parse(l, strlen(l), NULL, &a, &err) == 0 && a.phase == NOMAD_ALLOC_DEAD &&
			   !strcmp(a.reason, "node down"),
		   "a lost allocation's reason is the client's description, not its running task's last event");
	}
	sbx_err_clear(&err);
	ok(nomad_allocs_parse("{}", 2, NULL, &a, &err) < 0 && err.http == 503 && !strcmp(err.code, "bad_nomad_reply"),
	   "an object is not an allocation list");
	ok(nomad_allocs_parse("[{\"ID\":1}]", 10, NULL, &a, &err) < 0, "an allocation without string ID");
	ok(nomad_allocs_parse("[", 1, NULL, &a, &err) < 0, "truncated JSON");
}

static void evals(void)
{
	struct nomad_eval e;
	const char *placed = "{\"Status\":\"complete\",\"FailedTGAllocs\":null}";
	const char *nocap = "{\"Status\":\"complete\",\"BlockedEval\":\"b\",\"FailedTGAllocs\":{\"sandbox\":"
			    "{\"NodesEvaluated\":3,\"NodesFiltered\":1,\"ConstraintFiltered\":{\"missing network cni/sbx\":1},"
			    "\"NodesExhausted\":2,\"DimensionExhausted\":{\"memory\":2}}}}";
	const char *failed = "{\"Status\":\"failed\",\"StatusDescription\":\"maximum attempts reached (5)\"}";

	ok(nomad_eval_parse(placed, strlen(placed), &e, &err) == 0 && e.phase == NOMAD_EVAL_PLACED, "placed");
	ok(nomad_eval_parse("{\"Status\":\"pending\"}", 20, &e, &err) == 0 && e.phase == NOMAD_EVAL_PENDING, "pending");
	ok(nomad_eval_parse(nocap, strlen(nocap), &e, &err) == 0 && e.phase == NOMAD_EVAL_FAILED &&
		   strstr(e.reason, "no node could place it") && strstr(e.reason, "3 nodes evaluated") &&
		   strstr(e.reason, "missing network cni/sbx") && strstr(e.reason, "2 exhausted (memory)"),
	   "a placement failure is summarised");
	diag("reason: %s", e.reason);
	ok(nomad_eval_parse(failed, strlen(failed), &e, &err) == 0 && e.phase == NOMAD_EVAL_FAILED &&
		   !strcmp(e.reason, "evaluation failed: maximum attempts reached (5)"),
	   "a failed evaluation gives its description");
	ok(nomad_eval_parse("{\"Status\":3}", 12, &e, &err) < 0, "Status must be a string");
	ok(nomad_eval_parse("[]", 2, &e, &err) < 0, "an evaluation is an object");
}

static int seen;
static void count_job(const char *id, void *arg)
{
	(void)arg;
	if (!strcmp(id, "sbx-" SID) || !strcmp(id, "web"))
		seen++;
}

static void others(void)
{
	char eval[64], line[64];
	const char *jobs = "[{\"ID\":\"sbx-" SID "\"},{\"ID\":\"web\",\"Type\":\"service\"}]";

	ok(nomad_register_parse("{\"EvalID\":\"e-1\",\"JobModifyIndex\":7}", 35, eval, sizeof(eval), &err) == 0 &&
		   !strcmp(eval, "e-1"),
	   "register answer: EvalID");
	ok(nomad_register_parse("\"x\"", 3, eval, sizeof(eval), &err) < 0, "register answer must be an object");
	ok(nomad_jobs_parse(jobs, strlen(jobs), count_job, NULL, &err) == 2 && seen == 2, "job list: every id");
	ok(nomad_jobs_parse("[{\"Name\":\"x\"}]", 14, count_job, NULL, &err) < 0, "a job without ID");
	nomad_error_text("Permission denied\n", 18, line, sizeof(line));
	is_str(line, "Permission denied", "error text trimmed");
	nomad_error_text("1 error occurred:\n\t* Missing job ID\n\n", 38, line, sizeof(line));
	is_str(line, "1 error occurred: * Missing job ID", "error text on one line");
	nomad_error_text("", 0, line, sizeof(line));
	is_str(line, "no reason given", "an empty error body");
	nomad_error_text("\x1b[31mred\xff", 9, line, sizeof(line));
	is_str(line, "[31mred", "control and non-ASCII bytes dropped");
}

static void statuses(void)
{
	sbx_err_clear(&err);
	ok(nomad_status_check(200, "{}", 2, "x", &err) == 0 && nomad_status_check(204, "", 0, "x", &err) == 0,
	   "2xx is fine");
	ok(nomad_status_check(403, "Permission denied", 17, "register the job", &err) < 0 && err.http == 503 &&
		   !strcmp(err.code, "nomad_denied") && strstr(err.msg, "register the job: permission denied (403: Permission denied)"),
	   "403 -> 503 nomad_denied with the reason");
	ok(nomad_status_check(400, "1 error occurred:\n\t* Missing job ID\n", 36, "register the job", &err) < 0 &&
		   err.http == 503 && !strcmp(err.code, "nomad_invalid") && strstr(err.msg, "(400: 1 error occurred: * Missing job ID)"),
	   "400 -> 503 nomad_invalid with Nomad's validation errors");
	ok(nomad_status_check(500, "rpc error: No cluster leader", 28, "list jobs", &err) < 0 && err.http == 503 &&
		   !strcmp(err.code, "nomad_error") && strstr(err.msg, "(500: rpc error: No cluster leader)"),
	   "5xx -> 503 nomad_error with the text");
	ok(nomad_status_check(404, "", 0, "read", &err) < 0 && strstr(err.msg, "(404: no reason given)"),
	   "an empty body still gives a reason");
}

/* exec_spare_shell: sbx-init gets --spare-shell after its other arguments */
static void spare_shell(void)
{
	struct nomad_job_spec s = { .sandbox_id = SID, .namespace_ = "sandboxes", .region = "", .node_pool = "sandbox",
				    .network = "sbx", .image = "reg:5000/sbx/templates/debian-12:latest",
				    .init_path = "/usr/libexec/sbx/sbx-init", .cpu = 1000, .memory_mb = 512,
				    .pids_limit = 16384, .nproc = 2048, .spare_shell = true };
	json_t *j = nomad_job_build(&s), *t = path(j, "Job.TaskGroups.0.Tasks.0");

	is_str(s_at(t, "Config.args.3"), "2048", "with spare_shell: the process limit as before");
	is_str(s_at(t, "Config.args.4"), "--spare-shell", "... and --spare-shell after it");
	json_decref(j);
}

int main(void)
{
	statuses();
	job_shape();
	spare_shell();
	ids();
	vars();
	allocs();
	evals();
	others();
	return done_testing();
}

/* The node agent's requests that start things: admission (memory, disk,
 * volumes against the node's budget), start (cold, or a warm pool member
 * handed over), volume create/delete and an egress switch of a running
 * sandbox. node.c's loop dispatches to them. */
#include "config.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include "chanauth.h"
#include "cleanup.h"
#include "clock.h"
#include "egress.h"
#include "id.h"
#include "json.h"
#include "log.h"
#include "msg.h"
#include "node_int.h"
#include "reply.h"
#include "sandbox.h"
#include "nomad_vol.h"
#include "volume.h"

#define send_reply node_reply

/* {mode, allow} of a start or egress request (NULL: deny_all), strictly. */
static int egress_unpack(json_t *eg, struct sbx_egress *out, sbx_err *err)
{
	const char *mode = "deny_all";
	json_t *allow = NULL;
	json_error_t jerr;

	if (eg && json_unpack_ex(eg, &jerr, JSON_STRICT, "{s:s, s?o}", "mode", &mode, "allow", &allow) < 0)
		return sbx_err_set(err, 400, "bad_request", "egress: %s", jerr.text);
	return sbx_egress_parse(mode, allow, out, err);
}

static long long mem_total_mb(void)
{
	cleanup_fclose FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	long long kb = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %lld kB", &kb) == 1)
			break;
	return kb / 1024;
}

static int admit_disk(struct node *n, long long promised_disk, int disk, char *why, size_t whysz)
{
	struct statvfs vs;

	/* sparse images: what they may still grow into must fit the free disk */
	if (statvfs(n->sc.state_dir, &vs) == 0) {
		long long free_gb = (long long)vs.f_bavail * (long long)vs.f_frsize / (1024LL * 1024 * 1024);
		if ((promised_disk + disk) * 100 > free_gb * sbx_cfg_int(n->cfg, "node_disk_overcommit") + promised_disk * 100) {
			snprintf(why, whysz, "no capacity: %d GB of disk do not fit the node's free disk", disk);
			return -1;
		}
	}
	return 0;
}

/* Volumes live long and grow into what they were promised: every volume's
 * full size, with the new one, must fit what the node has for them (its
 * free disk plus what their images hold already) times the overcommit. */
int node_admit_volume(struct node *n, int gb, char *why, size_t whysz)
{
	long long used_gb = 0, promised = volume_promised_gb(&n->sc, &used_gb);
	struct statvfs vs;

	if (node_disk_admit(n, why, whysz) < 0)
		return -1;
	if (statvfs(n->sc.state_dir, &vs) < 0) {
		snprintf(why, whysz, "no capacity: cannot read the node's free disk");
		return -1;
	}
	long long free_gb = (long long)vs.f_bavail * (long long)vs.f_frsize / (1024LL * 1024 * 1024);
	long long budget = (free_gb + used_gb) * sbx_cfg_int(n->cfg, "node_disk_overcommit") / 100;
	if (promised + gb > budget) {
		snprintf(why, whysz,
			 "no capacity: a %d GB volume does not fit the node's disk budget (%lld GB promised to volumes "
			 "of %lld GB)",
			 gb, promised, budget);
		return -1;
	}
	return 0;
}

long long node_mem_cap(struct node *n)
{
	long long mem_cap = sbx_cfg_int(n->cfg, "node_memory_mb");

	if (!mem_cap)
		mem_cap = mem_total_mb();
	return mem_cap * sbx_cfg_int(n->cfg, "node_memory_overcommit") / 100;
}

int node_admit(struct node *n, int mem, int disk, bool count_pool, char *why, size_t whysz)
{
	long long mem_cap = node_mem_cap(n);
	long long used_mem = 0, promised_disk = 0;
	int count = 0;

	if (node_disk_admit(n, why, whysz) < 0)
		return -1;
	for (int i = 0; i < MAX_SANDBOXES; i++) {
		struct sb *s = &n->sbs[i];
		/* a create does not wait for the pool's members, nor for leftovers
		 * no record owns on their way out (an old life's members) */
		if (s->st == SB_FREE ||
		    (!count_pool && (s->pool || (s->st == SB_DESTROYING && !s->sandbox_id[0]))))
			continue;
		count++;
		used_mem += n->sbs[i].memory_mb;
		promised_disk += n->sbs[i].disk_gb;
	}
	if (count >= sbx_cfg_int(n->cfg, "node_max_sandboxes")) {
		snprintf(why, whysz, "no capacity: this node runs its maximum of %lld sandboxes",
			 sbx_cfg_int(n->cfg, "node_max_sandboxes"));
		return -1;
	}
	if (used_mem + mem > mem_cap) {
		snprintf(why, whysz, "no capacity: %lld MB of %lld MB of sandbox memory are promised", used_mem, mem_cap);
		return -1;
	}
	return admit_disk(n, promised_disk, disk, why, whysz);
}

/* Puts a running sandbox's new egress policy in force (one nft
 * transaction, a few ms: done here, in the loop; hostnames are resolved
 * first, without waiting in the loop) and answers once it is. */
void node_on_egress(struct node *n, const sbx_mq_msg *m, json_t *body)
{
	static struct sbx_egress p;
	const char *id = NULL, *sid = NULL; /* the placement, its record */
	cleanup_free char *resolved = NULL;
	json_t *eg = NULL;
	json_error_t jerr;
	sbx_err err = SBX_ERR_INIT;
	struct sb *s;

	if (json_unpack_ex(body, &jerr, JSON_STRICT, "{s:s, s:s, s:o}", "sandbox_id", &sid, "placement_id", &id, "egress",
			   &eg) < 0 ||
	    !sbx_id_valid(id) || !sbx_id_valid(sid) || egress_unpack(eg, &p, &err) < 0) {
		log_warnx("rejecting a malformed egress request: %s", err.msg[0] ? err.msg : jerr.text);
		send_reply(n, m->reply_to, m->correlation_id, sbx_reply_fail(NULL, "malformed egress request"));
		return;
	}
	s = sb_find(n, id);
	if (!s || s->st != SB_READY || s->pool || strcmp(s->sandbox_id, sid)) {
		send_reply(n, m->reply_to, m->correlation_id,
			   sbx_reply_fail("not_ready", s ? "the sandbox is not running on this node" :
							   "no such sandbox on this node"));
		return;
	}
	/* hostnames are asked through the loop, and the switch is answered
	 * once they are in (egress_node.c) */
	if (egress_node_switch(n->egress, id, &p, m->reply_to, m->correlation_id) == 0)
		return;
	/* a sandbox Nomad runs has the network sbx-cni had us wire: the same
	 * rules, switched the same way (one without it has no route out) */
	if (egress_node_set(n->egress, id, &p, &resolved, &err) < 0) {
		log_warnx("sandbox %s: %s (the policy in force before stays)", id, err.msg);
		send_reply(n, m->reply_to, m->correlation_id,
			   sbx_reply_fail(err.http == 400 ? "not_supported" : "egress_failed", err.msg));
		return;
	}
	send_reply(n, m->reply_to, m->correlation_id,
		   json_pack("{s:b, s:s}", "ok", 1, "resolved", resolved ? resolved : "{}"));
}

/* The record's policy in force on an adopted sandbox's network (the one
 * sbx-cni had us wire, deny_all until now). A sandbox without that network
 * has loopback only: fine for deny_all, a failure for any other mode. */
static int adopt_egress(struct node *n, const char *id, const struct sbx_egress *p, sbx_err *err)
{
	char ip[16];
	sbx_err e2 = SBX_ERR_INIT;

	if (net_sandbox_ip(&n->net, id, ip, &e2) < 0) {
		if (p->mode == SBX_EGRESS_DENY_ALL)
			return 0;
		return sbx_err_set(err, 503, "egress_failed",
				   "its Nomad allocation has no sbx network on this node (%s): is the network's CNI "
				   "plugin sbx-cni?",
				   e2.msg);
	}
	return egress_node_set(n->egress, id, p, NULL, err);
}

/* ---- adoption: sbx-init of Nomad's task answers in the loop's ticks ----
 * Nomad reports the task running once its container started, and sbx-init
 * listens a few ms later. Its socket is dialled and its handshake (with the
 * key the job gave the task: that is what makes it ready) run from the
 * loop's ticks (node_adopt_tick) every ADOPT_CHECK_MS for up to ADOPT_MS,
 * never waited for in the loop: with a thousand sandboxes on the node,
 * one task slow to start holds up none of them. */
#define ADOPT_MS 3000
#define ADOPT_CHECK_MS 10

struct adopt_wait {
	struct adopt_wait *next;
	char id[SBX_ID_LEN + 1], sid[SBX_ID_LEN + 1], alloc[80], reply_to[256], corr[72];
	struct sbx_egress egress;
	long long t0, next_at;
	int fd;
	struct sbx_chan_hs hs;
	bool hs_on;
	char why[256]; /* the last dial's or handshake's failure */
};
static struct adopt_wait *adopts;

static void adopt_close(struct adopt_wait *w)
{
	if (w->hs_on)
		sbx_chan_hs_clear(&w->hs);
	w->hs_on = false;
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

/* Unlinks and frees w; msg: the failure (code, or NULL) to answer with,
 * its state gone; NULL when it was answered. */
static void adopt_end(struct node *n, struct adopt_wait *w, const char *code, const char *msg)
{
	struct adopt_wait **pp = &adopts;

	while (*pp && *pp != w)
		pp = &(*pp)->next;
	if (*pp)
		*pp = w->next;
	adopt_close(w);
	if (msg) {
		sbx_err e2 = SBX_ERR_INIT;
		log_warnx("sandbox %s: Nomad allocation %s: %s", w->sid, w->alloc, msg);
		if (sandbox_adopted_forget(&n->sc, w->id, &e2) < 0)
			log_warnx("sandbox %s: %s", w->sid, e2.msg);
		send_reply(n, w->reply_to, w->corr, sbx_reply_fail(code, msg));
	}
	free(w);
}

/* sbx-init answered: the sandbox is this node's */
static void adopt_done(struct node *n, struct adopt_wait *w)
{
	sbx_err err = SBX_ERR_INIT;
	struct sb *s;

	adopt_close(w);
	if (adopt_egress(n, w->id, &w->egress, &err) < 0) {
		egress_node_forget(n->egress, w->id);
		adopt_end(n, w, NULL, err.msg);
		return;
	}
	s = sb_add(n, w->id, SB_READY, 0, 0); /* Nomad admitted its memory and disk */
	if (!s) {
		egress_node_forget(n->egress, w->id);
		adopt_end(n, w, "no_capacity", "the node tracks too many sandboxes");
		return;
	}
	snprintf(s->sandbox_id, sizeof(s->sandbox_id), "%s", w->sid);
	{
		/* where its use is read from (stats): Docker asked once, now */
		char rel[520];
		long pid;
		if (sandbox_adopted_cgroup(&n->sc, w->id, rel, sizeof(rel), &pid, &err) < 0)
			log_warnx("sandbox %s: its container's cgroup: %s (stats wait for a request)", w->sid, err.msg);
	}
	log_info("sandbox %s: adopted Nomad allocation %s as placement %s (sbx-init answered in %lld ms, in the loop's "
		 "ticks)",
		 w->sid, w->alloc, w->id, sbx_now_ms() - w->t0);
	send_reply(n, w->reply_to, w->corr, sbx_reply_ok());
	adopt_end(n, w, NULL, NULL);
}

long long node_adopt_tick(struct node *n)
{
	long long now = sbx_now_ms(), next = -1;
	/* a test holds the wait (nomad-run.t): no dial, no deadline */
	bool held = adopts && fault_armed(n->sc.fault_points, n->sc.state_dir, "adopt-hold", NULL);

	for (struct adopt_wait *w = adopts, *nx; w; w = nx) {
		sbx_err err = SBX_ERR_INIT;
		int rc = 0;

		nx = w->next;
		if (now < w->next_at) {
			if (next < 0 || w->next_at - now < next)
				next = w->next_at - now;
			continue;
		}
		if (!held && !w->hs_on) {
			uint8_t key[SBX_CHAN_KEY_LEN];
			if (sandbox_dial(&n->sc, w->id, &w->fd, key, &err) == 0 &&
			    fcntl(w->fd, F_SETFL, fcntl(w->fd, F_GETFL) | O_NONBLOCK) == 0) {
				sbx_chan_hs_init(&w->hs, key, w->id);
				w->hs_on = true;
			} else {
				snprintf(w->why, sizeof(w->why), "%s", err.msg[0] ? err.msg : "socket setup");
				adopt_close(w);
			}
			explicit_bzero(key, sizeof(key));
		}
		if (w->hs_on) {
			/* each step reads what is there (HELLO, then AUTH_OK) */
			for (int i = 0; i < 4 && rc == 0; i++)
				rc = sbx_chan_hs_step(&w->hs, w->fd, &err);
			if (rc == 1) {
				adopt_done(n, w);
				continue;
			}
			if (rc < 0) {
				/* it may not be sbx-init's yet: dialled again until the end */
				snprintf(w->why, sizeof(w->why), "%s", err.msg);
				adopt_close(w);
			}
		}
		if (!held && now - w->t0 >= ADOPT_MS) {
			char msg[400];
			snprintf(msg, sizeof(msg), "sbx-init of Nomad's task not up within %d ms: %s", ADOPT_MS,
				 w->why[0] ? w->why : "no answer");
			adopt_end(n, w, NULL, msg);
			continue;
		}
		w->next_at = now + ADOPT_CHECK_MS;
		if (next < 0 || ADOPT_CHECK_MS < next)
			next = ADOPT_CHECK_MS;
	}
	return next;
}

bool node_adopt_waiting(const char *id)
{
	for (struct adopt_wait *w = adopts; w; w = w->next)
		if (!strcmp(w->id, id))
			return true;
	return false;
}

void node_adopt_drop(struct node *n)
{
	while (adopts)
		adopt_end(n, adopts, NULL, "the node agent is stopping");
}

void node_on_adopt(struct node *n, const sbx_mq_msg *m, json_t *body)
{
	const char *id = NULL, *sid = NULL, *alloc = NULL, *key = NULL;
	json_t *eg = NULL;
	json_error_t jerr;
	sbx_err err = SBX_ERR_INIT;
	struct adopt_wait *w;
	struct sb *s;

	w = calloc(1, sizeof(*w));
	if (!w) {
		send_reply(n, m->reply_to, m->correlation_id, sbx_reply_fail(NULL, "out of memory"));
		return;
	}
	w->fd = -1;
	if (json_unpack_ex(body, &jerr, JSON_STRICT, "{s:s, s:s, s:s, s:s, s?o}", "sandbox_id", &sid, "placement_id",
			   &id, "alloc_id", &alloc, "chan_key", &key, "egress", &eg) < 0 ||
	    !sbx_id_valid(id) || !sbx_id_valid(sid) || strlen(alloc) >= sizeof(w->alloc) ||
	    egress_unpack(eg, &w->egress, &err) < 0) {
		log_warnx("rejecting a malformed adopt request");
		send_reply(n, m->reply_to, m->correlation_id, sbx_reply_fail(NULL, "malformed adopt request"));
		free(w);
		return;
	}
	for (struct adopt_wait *o = adopts; o; o = o->next) {
		if (strcmp(o->id, id))
			continue;
		/* a repeated request (a provisioner restarted) while it waits:
		 * the answer goes to the newest asker */
		if (!strcmp(o->sid, sid)) {
			snprintf(o->reply_to, sizeof(o->reply_to), "%s", m->reply_to);
			snprintf(o->corr, sizeof(o->corr), "%s", m->correlation_id);
		} else {
			send_reply(n, m->reply_to, m->correlation_id,
				   sbx_reply_fail(NULL, "the placement is taken on this node"));
		}
		free(w);
		return;
	}
	s = sb_find(n, id);
	if (s) {
		/* a repeated request (a provisioner restarted) is answered as the first */
		bool same = s->nomad && s->st == SB_READY && !strcmp(s->sandbox_id, sid);
		send_reply(n, m->reply_to, m->correlation_id,
			   same ? sbx_reply_ok() : sbx_reply_fail(NULL, "the placement is taken on this node"));
		free(w);
		return;
	}
	if (sandbox_adopt(&n->sc, id, alloc, key, &err) < 0) {
		log_warnx("sandbox %s: adopting Nomad allocation %s: %s", sid, alloc, err.msg);
		send_reply(n, m->reply_to, m->correlation_id, sbx_reply_fail(NULL, err.msg));
		free(w);
		return;
	}
	snprintf(w->id, sizeof(w->id), "%s", id);
	snprintf(w->sid, sizeof(w->sid), "%s", sid);
	snprintf(w->alloc, sizeof(w->alloc), "%s", alloc);
	snprintf(w->reply_to, sizeof(w->reply_to), "%s", m->reply_to);
	snprintf(w->corr, sizeof(w->corr), "%s", m->correlation_id);
	w->t0 = w->next_at = sbx_now_ms();
	w->next = adopts;
	adopts = w;
	log_info("sandbox %s: adopting Nomad allocation %s: waiting for its sbx-init (in the loop's ticks)", sid, alloc);
}

void node_on_start(struct node *n, const sbx_mq_msg *m, json_t *body)
{
	const char *id, *sid, *tmpl, *vid = NULL, *mpath = NULL, *image = NULL;
	int cpu, mem, disk, vgb = 0, vcreate = 0;
	json_t *env, *vol = NULL, *eg = NULL;
	json_error_t jerr;
	char why[300];
	struct sandbox_spec spec;
	static struct sbx_egress egress; /* read by the start process (forked below) */
	sbx_err eerr = SBX_ERR_INIT;
	const char **envv = NULL;
	size_t ne, k = 0;
	const char *key;
	json_t *v;
	cleanup_free char *envbuf = NULL;

	jerr.text[0] = 0;
	/* id: the placement, which names everything of it here; sid: its record */
	if (json_unpack_ex(body, &jerr, JSON_STRICT, "{s:s, s:s, s:s, s:i, s:i, s:i, s:o, s?o, s?o, s?s}", "sandbox_id",
			   &sid, "placement_id", &id, "template", &tmpl, "cpu", &cpu, "memory_mb", &mem, "disk_gb", &disk,
			   "env", &env, "volume", &vol, "egress", &eg, "image", &image) < 0 ||
	    /* checked in full where it is used (sandbox_image_resolve) */
	    (image && (strncmp(image, "sbx/snapshots/", 14) || strlen(image) > 120)) ||
	    (vol && json_unpack_ex(vol, &jerr, JSON_STRICT, "{s:s, s:s, s:i, s:b}", "id", &vid, "mount_path", &mpath,
				   "size_gb", &vgb, "create", &vcreate) < 0) ||
	    !sbx_id_valid(id) || !sbx_id_valid(sid) || !template_name_ok(tmpl) || cpu < 1 || cpu > 100000 || mem < 1 ||
	    mem > 16777216 || disk < 1 || disk > 100000 || !json_is_object(env) ||
	    (vol && (!sbx_id_valid(vid) || mpath[0] != '/' || strlen(mpath) > 200 || strstr(mpath, "/..") ||
		     vgb < 1 || vgb > 100000)) ||
	    egress_unpack(eg, &egress, &eerr) < 0) {
		log_warnx("rejecting a malformed start request: %s", jerr.text[0] ? jerr.text : eerr.msg);
		send_reply(n, m->reply_to, m->correlation_id, sbx_reply_fail(NULL, "malformed start request"));
		return;
	}
	{
		/* a repeated start (a provisioner restarted and got the request
		 * again): answer it as the first one would be answered */
		struct sb *s = sb_find(n, id);
		struct op *o = s ? node_op_find(n, id) : NULL;
		if (s && (s->pool || (s->sandbox_id[0] && strcmp(s->sandbox_id, sid)))) {
			log_warnx("sandbox %s: refusing a start of placement %s, which serves %s", sid, id,
				  s->sandbox_id[0] ? s->sandbox_id : "the warm pool");
			send_reply(n, m->reply_to, m->correlation_id,
				   sbx_reply_fail(NULL, "the placement serves another sandbox"));
			return;
		}
		if (s && s->st == SB_READY) {
			log_info("sandbox %s: repeated start: it is running", sid);
			send_reply(n, m->reply_to, m->correlation_id,
				   json_pack("{s:b, s:s, s:s}", "ok", 1, "container_id", id, "placement_id", id));
			return;
		}
		if (s && s->st == SB_STARTING && o && o->kind == OP_START) {
			log_info("sandbox %s: repeated start: answering it when the start ends", sid);
			o->reply = true;
			snprintf(o->reply_to, sizeof(o->reply_to), "%s", m->reply_to);
			snprintf(o->corr, sizeof(o->corr), "%s", m->correlation_id);
			snprintf(o->req_id, sizeof(o->req_id), "%s", m->request_id);
			return;
		}
		if (s) {
			send_reply(n, m->reply_to, m->correlation_id,
				   sbx_reply_fail(NULL, "the sandbox is being destroyed on the node"));
			return;
		}
	}
	/* warm: a member that matches is handed over, and answers at once;
	 * never to a create with a volume (a member has none mounted), and
	 * only with deny_all, the policy a member started with (any other is
	 * put in force by the start process, before the container runs) */
	if (node_disk_admit(n, why, sizeof(why)) < 0) {
		/* a warm member too: what it would write is new work */
		log_warnx("sandbox %s: %s", sid, why);
		send_reply(n, m->reply_to, m->correlation_id, sbx_reply_fail("no_capacity", why));
		return;
	}
	if (!vol && !image && egress.mode == SBX_EGRESS_DENY_ALL && pool_take(n, m, sid, tmpl, cpu, mem, disk))
		return;
	if (node_admit(n, mem, disk, false, why, sizeof(why)) < 0 ||
	    (vid && vcreate && node_admit_volume(n, vgb, why, sizeof(why)) < 0)) {
		log_warnx("sandbox %s: %s", sid, why);
		send_reply(n, m->reply_to, m->correlation_id, sbx_reply_fail("no_capacity", why));
		return;
	}
	ne = json_object_size(env);
	envv = calloc(ne + 1, sizeof(*envv));
	{
		/* "K=V" strings in one buffer */
		size_t total = 0;
		json_object_foreach(env, key, v) total += strlen(key) + 1 + json_string_length(v) + 1;
		envbuf = malloc(total + 1);
		if (!envv || !envbuf) {
			free(envv);
			send_reply(n, m->reply_to, m->correlation_id, sbx_reply_fail(NULL, "out of memory"));
			return;
		}
		char *p = envbuf;
		json_object_foreach(env, key, v) {
			if (!json_is_string(v))
				continue;
			envv[k++] = p;
			p += sprintf(p, "%s=%s", key, json_string_value(v)) + 1;
		}
		envv[k] = NULL;
	}
	memset(&spec, 0, sizeof(spec));
	snprintf(spec.id, sizeof(spec.id), "%s", id);
	spec.template = tmpl;
	spec.cpu = cpu;
	spec.memory_mb = mem;
	spec.disk_gb = disk;
	spec.env = envv;
	spec.volume_id = vid;
	spec.mount_path = mpath;
	spec.volume_gb = vgb;
	spec.volume_create = vcreate;
	spec.egress = &egress;
	/* the start process is forked below, with the body (and image) in its copy */
	spec.image = image;
	{
		struct sb *s = sb_add(n, id, SB_STARTING, mem, disk);
		if (s)
			snprintf(s->sandbox_id, sizeof(s->sandbox_id), "%s", sid);
		if (!s || node_start_op(n, &spec, m, false) < 0) {
			if (s)
				s->st = SB_FREE;
			send_reply(n, m->reply_to, m->correlation_id,
				   sbx_reply_fail(NULL, "node agent could not start a worker process"));
		} else {
			egress_node_pending(n->egress, id, &egress);
			log_info("sandbox %s: starting as placement %s (%s, %d MB, %d GB)", sid, id, tmpl, mem, disk);
			pool_trim(n); /* the pool gives up the room a create needs */
		}
	}
	free(envv);
}

/* volume.create {volume_id, size_gb} (admitted against the node's disk
 * first) and volume.delete {volume_id}: made in a short-lived process,
 * answered when it ends. */
void node_on_volume(struct node *n, const sbx_mq_msg *m, enum sbx_msg_kind kind, json_t *body)
{
	const char *vid = NULL;
	int gb = 0;
	json_error_t jerr;
	char why[300];
	int r = kind == SBX_MSG_VOLUME_CREATE
			? json_unpack_ex(body, &jerr, JSON_STRICT, "{s:s, s:i}", "volume_id", &vid, "size_gb", &gb)
			: json_unpack_ex(body, &jerr, JSON_STRICT, "{s:s}", "volume_id", &vid);

	if (r < 0 || !sbx_id_valid(vid) || (kind == SBX_MSG_VOLUME_CREATE && (gb < 1 || gb > 100000))) {
		log_warnx("rejecting a malformed %s request", sbx_msg_name(kind));
		send_reply(n, m->reply_to, m->correlation_id, sbx_reply_fail(NULL, "malformed volume request"));
		return;
	}
	if (node_op_find(n, vid)) {
		send_reply(n, m->reply_to, m->correlation_id,
			   sbx_reply_fail("busy", "another change to this volume is in flight on the node"));
		return;
	}
	if (kind == SBX_MSG_VOLUME_CREATE && node_admit_volume(n, gb, why, sizeof(why)) < 0) {
		log_warnx("volume %s: %s", vid, why);
		send_reply(n, m->reply_to, m->correlation_id, sbx_reply_fail("no_capacity", why));
		return;
	}
	if (node_op_spawn(n, kind == SBX_MSG_VOLUME_CREATE ? OP_VOLUME_CREATE : OP_VOLUME_DELETE, vid, m, gb) < 0)
		send_reply(n, m->reply_to, m->correlation_id,
			   sbx_reply_fail(NULL, "node agent could not start a worker process"));
}


void node_on_volume_mount(struct node *n, const sbx_mq_msg *m, json_t *body)
{
	const char *sid = NULL, *vid = NULL;
	int gb = 0, create = 0;
	json_error_t jerr;
	char why[300];

	if (json_unpack_ex(body, &jerr, JSON_STRICT, "{s:s, s:s, s:i, s:b}", "sandbox_id", &sid, "volume_id", &vid,
			   "size_gb", &gb, "create", &create) < 0 ||
	    !sbx_id_valid(sid) || !sbx_id_valid(vid) || gb < 1 || gb > 100000) {
		log_warnx("rejecting a malformed volume.mount request");
		send_reply(n, m->reply_to, m->correlation_id, sbx_reply_fail(NULL, "malformed volume.mount request"));
		return;
	}
	if (node_op_find(n, sid) || node_op_find(n, vid)) {
		send_reply(n, m->reply_to, m->correlation_id,
			   sbx_reply_fail("busy", "another change to this sandbox or volume is in flight on the node"));
		return;
	}
	/* a fresh volume (persistent: true) is promised here, as a local start's */
	if (create && !nomad_vol_present(&n->sc, sid) && node_admit_volume(n, gb, why, sizeof(why)) < 0) {
		log_warnx("sandbox %s: volume %s: %s", sid, vid, why);
		send_reply(n, m->reply_to, m->correlation_id, sbx_reply_fail("no_capacity", why));
		return;
	}
	log_info("sandbox %s: mounting volume %s for Nomad's task", sid, vid);
	if (node_op_spawn_mount(n, sid, vid, gb, create, m) < 0)
		send_reply(n, m->reply_to, m->correlation_id,
			   sbx_reply_fail(NULL, "node agent could not start a worker process"));
}

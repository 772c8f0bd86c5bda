/* The OCI bundle of a sandbox (oci.h): bundle/config.json for runsc, with
 * the sandbox's limits, its network namespace, the channel's bind mount and
 * sbx-init as PID 1. */
#include "config.h"
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "chanauth.h"
#include "cleanup.h"
#include "err.h"
#include "oci.h"
#include "runsc.h"

/* KEY=VALUE list with later entries replacing earlier ones of the same KEY. */
static void env_put(json_t *env, const char *kv)
{
	const char *eq = strchr(kv, '=');
	size_t kl, i;
	json_t *v;

	if (!eq || eq == kv)
		return;
	kl = (size_t)(eq - kv) + 1;
	json_array_foreach(env, i, v) {
		if (strncmp(json_string_value(v), kv, kl) == 0) {
			json_array_set_new(env, i, json_string(kv));
			return;
		}
	}
	json_array_append_new(env, json_string(kv));
}

/* specs.cpu is in MHz shares, 1000 = one core (API.md: 1..2000): the
 * weight (cpu.shares) under contention and the cap (the CFS quota). The
 * cap never goes under CPU_QUOTA_MIN_MHZ: under 1 ms per period the kernel
 * refuses the quota (EINVAL, runsc fails the create), and at a few percent
 * of a core gVisor's boot and sbx-init do not come up within start_timeout
 * (seen: 1 and 10 MHz never ready in 25 s; 100 MHz ready in 5.4 s, 250 in
 * 2.3 s on a loaded 2-CPU machine). The weight is always what was asked
 * (the kernel's floor of 2 shares aside). */
#define CPU_PERIOD_USEC 100000
#define CPU_QUOTA_MIN_MHZ 100
static long long cpu_quota_usec(int mhz)
{
	return (long long)(mhz < CPU_QUOTA_MIN_MHZ ? CPU_QUOTA_MIN_MHZ : mhz) * CPU_PERIOD_USEC / 1000;
}

static long long cpu_shares(int mhz)
{
	long long sh = (long long)mhz * 1024 / 1000;
	return sh < 2 ? 2 : sh;
}

static json_t *mount_entry(const char *dst, const char *type, const char *src, const char *opts)
{
	json_t *m = json_pack("{s:s, s:s, s:s, s:[]}", "destination", dst, "type", type, "source", src,
			      "options");
	json_t *o = json_object_get(m, "options");
	char buf[256], *save = NULL, *t;

	snprintf(buf, sizeof(buf), "%s", opts);
	for (t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
		json_array_append_new(o, json_string(t));
	return m;
}

/* Capabilities a template may ask for beyond the default set (its
 * template.json "sandbox": {"capabilities": [...]}, recorded by
 * templates/unpack in image.json). They are gVisor's, not the host's: the
 * sentry implements them against its own kernel (the docker template's
 * dockerd mounts overlays and cgroups, makes namespaces and reads its
 * children's /proc/PID/exe). Anything else is refused, so a template
 * cannot widen the set by a typo or by design. */
static const char *const template_caps_ok[] = { "CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_SYS_PTRACE" };

/* The extra capabilities of the template under LOWER (its bottom layer,
 * .../templates/NAME/DIGEST/rootfs, is the template's even under a
 * snapshot's layers), appended to CAPV. No image.json or no list: none. */
static int template_caps(const char *lower, json_t *capv, sbx_err *err)
{
	const char *bottom = strrchr(lower, ':');
	char path[1600];
	size_t n, i, k;
	json_t *img, *list, *v;
	json_error_t je;
	int rc = 0;

	bottom = bottom ? bottom + 1 : lower;
	n = strlen(bottom);
	if (n < 7 || strcmp(bottom + n - 7, "/rootfs") != 0)
		return 0;
	snprintf(path, sizeof(path), "%.*s/image.json", (int)(n - 7), bottom);
	if (!(img = json_load_file(path, 0, &je)))
		return 0;
	list = json_object_get(img, "capabilities");
	json_array_foreach(list, i, v) {
		const char *cap = json_string_value(v);
		for (k = 0; cap && k < SBX_ARRAY_LEN(template_caps_ok); k++)
			if (strcmp(cap, template_caps_ok[k]) == 0)
				break;
		if (!cap || k == SBX_ARRAY_LEN(template_caps_ok)) {
			rc = sbx_err_set(err, 500, "template", "%s asks for capability '%.40s', which a sandbox is not given",
					 path, cap ? cap : "(not a string)");
			break;
		}
		json_array_append_new(capv, json_string(cap));
	}
	json_decref(img);
	return rc;
}

static json_t *oci_spec(const struct sandbox_node_cfg *c, const struct sandbox_spec *s,
			const struct sandbox_paths *p, json_t *image_env, json_t *capv, const char *key_hex)
{
	static const char *const caps[] = {
		/* Docker's default set for root, without NET_RAW (gVisor offers
		 * no raw sockets without --net-raw anyway). */
		"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
		"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
		"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
	};
	static const char *const masked[] = { "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
		"/proc/scsi", "/sys/firmware" };
	static const char *const ro[] = { "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
					  "/proc/sysrq-trigger" };
	json_t *env = json_array(), *args, *mounts, *spec, *v;
	char hostname[32], netns[128], cgpath[64], nproc_arg[16], shm_opts[96], kv[128];
	size_t i;
	int64_t mem = (int64_t)s->memory_mb * 1024 * 1024;
	int nproc = sandbox_nproc(c, s), nproc_init = nproc;
	/* /dev/shm is memory: a quarter of the sandbox's, 64 MiB at most */
	long shm_kb = (long)s->memory_mb * 1024 / 4;

	if (shm_kb > 65536)
		shm_kb = 65536;
	snprintf(shm_opts, sizeof(shm_opts), "nosuid,noexec,nodev,mode=1777,size=%ldk", shm_kb);

	env_put(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	env_put(env, "HOME=/root");
	env_put(env, "LANG=C.UTF-8");
	json_array_foreach(image_env, i, v)
		if (json_is_string(v))
			env_put(env, json_string_value(v));
	for (const char *const *e = s->env; e && *e; e++)
		env_put(env, *e);
	for (i = 0; i < SBX_ARRAY_LEN(caps); i++)
		json_array_insert_new(capv, i, json_string(caps[i]));
	if (sandbox_has_init(c)) {
		/* sbx-init's own limit has headroom; it gives each command
		 * the sandbox's (--nproc), which a command cannot raise */
		nproc_init = nproc + SANDBOX_INIT_NPROC_HEADROOM;
		snprintf(nproc_arg, sizeof(nproc_arg), "%d", nproc);
		args = json_pack("[s,s,s,s,s]", INIT_IN_SANDBOX, "--channel", CHAN_IN_SANDBOX "/" CHAN_SOCK_NAME,
				 "--nproc", nproc_arg);
		if (c->spare_shell)
			json_array_append_new(args, json_string("--spare-shell"));
		/* the environment of sbx-init, not of commands (it clears them) */
		snprintf(kv, sizeof(kv), SBX_CHAN_KEY_ENV "=%s", key_hex ? key_hex : "");
		env_put(env, kv);
		snprintf(kv, sizeof(kv), SBX_CHAN_ID_ENV "=%s", s->id);
		env_put(env, kv);
		/* no rendered key file here: the sandbox's env cannot name one */
		env_put(env, SBX_CHAN_KEY_FILE_ENV "=");
	} else
		args = json_pack("[s,s]", "/bin/sleep", "infinity");
	snprintf(hostname, sizeof(hostname), "sbx-%.12s", s->id);
	snprintf(netns, sizeof(netns), "/run/netns/sbx-%s", s->id);
	snprintf(cgpath, sizeof(cgpath), "/" CGROUP_PARENT "/%s", s->id);

	mounts = json_array();
	json_array_append_new(mounts, mount_entry("/proc", "proc", "proc", "nosuid,noexec,nodev"));
	json_array_append_new(mounts, mount_entry("/dev", "tmpfs", "tmpfs", "nosuid,strictatime,mode=755,size=65536k"));
	json_array_append_new(mounts, mount_entry("/dev/pts", "devpts", "devpts",
						  "nosuid,noexec,newinstance,ptmxmode=0666,mode=0620"));
	json_array_append_new(mounts, mount_entry("/dev/shm", "tmpfs", "shm", shm_opts));
	json_array_append_new(mounts, mount_entry("/dev/mqueue", "mqueue", "mqueue", "nosuid,noexec,nodev"));
	json_array_append_new(mounts, mount_entry("/sys", "sysfs", "sysfs", "nosuid,noexec,nodev,ro"));
	json_array_append_new(mounts, mount_entry(CHAN_IN_SANDBOX, "bind", p->chan_dir, "rbind,rw,nosuid,nodev,noexec"));
	/* on the sandbox's disk: without it gVisor mounts a tmpfs of no size
	 * at /tmp, and filling it kills the whole sandbox */
	json_array_append_new(mounts, mount_entry("/tmp", "bind", p->tmp_dir, "rbind,rw,nosuid,nodev"));
	if (s->volume_id) {
		/* the volume's ext4, mounted by volume_attach under the sandbox's dir */
		char vol[600];
		snprintf(vol, sizeof(vol), "%s/volume", p->dir);
		json_array_append_new(mounts, mount_entry(s->mount_path, "bind", vol, "rbind,rw,nosuid,nodev"));
	}
	if (sandbox_has_init(c))
		json_array_append_new(mounts, mount_entry(INIT_IN_SANDBOX, "bind", c->init_path, "bind,ro,nosuid,nodev"));

	spec = json_pack(
		"{s:s, s:{s:b, s:{s:i, s:i}, s:o, s:o, s:s, s:{s:o, s:o, s:o, s:o}, s:[{s:s, s:i, s:i}, {s:s, s:i, s:i}], s:b},"
		" s:{s:s, s:b}, s:s, s:o,"
		" s:{s:s, s:{s:{s:I, s:I}, s:{s:I, s:I, s:I}, s:{s:I}},"
		"    s:[{s:s}, {s:s}, {s:s}, {s:s}, {s:s, s:s}], s:[], s:[]}}",
		"ociVersion", "1.0.2",
		"process", "terminal", 0, "user", "uid", 0, "gid", 0, "args", args, "env", env, "cwd", "/",
		"capabilities", "bounding", capv, "effective", json_deep_copy(capv), "permitted",
		json_deep_copy(capv), "inheritable", json_array(),
		"rlimits", "type", "RLIMIT_NPROC", "hard", nproc_init, "soft", nproc_init,
		"type", "RLIMIT_NOFILE", "hard", 524288, "soft", 1024,
		"noNewPrivileges", 1,
		"root", "path", p->rootfs, "readonly", 0,
		"hostname", hostname,
		"mounts", mounts,
		"linux", "cgroupsPath", cgpath,
		"resources", "memory", "limit", (json_int_t)mem, "swap", (json_int_t)mem,
		"cpu", "shares", (json_int_t)cpu_shares(s->cpu), "quota", (json_int_t)cpu_quota_usec(s->cpu),
		"period", (json_int_t)CPU_PERIOD_USEC,
		"pids", "limit", (json_int_t)c->pids_max,
		"namespaces", "type", "pid", "type", "ipc", "type", "uts", "type", "mount",
		"type", "network", "path", netns,
		"maskedPaths", "readonlyPaths");
	if (!spec)
		return NULL;
	{
		json_t *lx = json_object_get(spec, "linux");
		json_t *mp = json_object_get(lx, "maskedPaths"), *rp = json_object_get(lx, "readonlyPaths");
		for (i = 0; i < SBX_ARRAY_LEN(masked); i++)
			json_array_append_new(mp, json_string(masked[i]));
		for (i = 0; i < SBX_ARRAY_LEN(ro); i++)
			json_array_append_new(rp, json_string(ro[i]));
	}
	return spec;
}

int oci_write_bundle(const struct sandbox_node_cfg *c, const struct sandbox_spec *s,
		     const struct sandbox_paths *p, const char *lower, json_t *image_env, const char *key_hex,
		     sbx_err *err)
{
	json_t *spec, *capv = json_array();
	char path[600];
	int rc;

	if (!capv)
		return sbx_err_set(err, 500, "sandbox", "out of memory");
	if (template_caps(lower, capv, err) < 0) {
		json_decref(capv);
		return -1;
	}
	if (mkdir(p->bundle, 0700) < 0) {
		json_decref(capv);
		return sbx_err_sys(err, "sandbox", "mkdir %s", p->bundle);
	}
	/* oci_spec owns capv from here */
	if (!(spec = oci_spec(c, s, p, image_env, capv, key_hex)))
		return sbx_err_set(err, 500, "sandbox", "cannot build config.json");
	snprintf(path, sizeof(path), "%s/config.json", p->bundle);
	/* it holds the channel key: the node agent's eyes only */
	rc = json_dump_file(spec, path, JSON_SORT_KEYS | JSON_INDENT(1));
	if (rc == 0 && chmod(path, 0600) < 0)
		rc = -1;
	json_decref(spec);
	return rc < 0 ? sbx_err_sys(err, "sandbox", "write %s", path) : 0;
}

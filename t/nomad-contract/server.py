#!/usr/bin/env python3
"""A contract server for sbx's Nomad driver (workers/driver_nomad.c).

Nomad cannot be installed on the test machine, so the driver is tested
against this program. It is NOT Nomad. It answers the endpoints the driver
uses the way Nomad's documented HTTP API does (field names, status codes,
blocking queries with ?index=&wait= and the X-Nomad-Index header, ACL
tokens in X-Nomad-Token), and it checks every job it receives against
Nomad's JSON job specification (developer.hashicorp.com/nomad/api-docs/json-jobs,
the docker task driver's documented config, the restart/reschedule/network
blocks). On purpose it is STRICTER than Nomad in one way: an unknown field
is refused with 400 (Nomad ignores unknown JSON fields), so a misspelt field
in the driver cannot pass silently.

It models one Nomad client ("node") whose docker plugin is configured as
doc/nomad.md says (allow_runtimes, allow_caps, volumes, a CNI network); a
job that the client could not run fails the way Nomad reports it: a
placement failure on the evaluation (FailedTGAllocs, a blocked evaluation)
or a dead task with a driver-failure event. Constraints (the job's, the
groups', the tasks') are validated as Nomad validates them (a known
operand; both sides for a comparison) and, for equality and inequality
on the node's ${node.unique.name}, ${node.unique.id}, ${node.pool} and
${node.datacenter}, evaluated against its one node: one that does not hold
is a placement failure (ConstraintFiltered naming it); other operands are
not evaluated.

With --docker-host it also plays the client's docker driver: an
allocation it placed is started through that Docker engine (Debian's
docker.io, started by the test with runsc registered as a runtime) the way
Nomad's docker driver does: the task config's image (pulled), runtime,
command and args, pids_limit, cap_drop/cap_add, mounts, the task's Env plus
Nomad's NOMAD_* variables, CPU as cpu shares, MemoryMB as the reservation
and MemoryMaxMB as the hard limit, and the allocation directory
(--alloc-dir/ALLOC/alloc bound at /alloc, TASK/local at /local,
TASK/secrets at /secrets). The allocation runs once the container runs;
a pull or run that fails is a dead task with a "Driver Failure" event
carrying Docker's error. Deregistering the job removes its allocations'
containers and directories (a lost allocation's task runs on until then,
as on a client Nomad's servers lost contact with). Containers carry the label
sbx-nomad-contract=1, so a test removes whatever is left.

With --cni-config-dir and --cni-path it also plays the client's CNI
networking for a group whose network mode is cni/NAME, as Nomad documents
it (job-networking/cni, the client's cni_path and cni_config_dir): before
the tasks start, a pause container per allocation with no network
("nomad_init_ALLOC", Docker's default runtime; Nomad uses its infra_image,
this server the task's image running `sleep infinity`); the plugins of the
configuration list named NAME in --cni-config-dir are run from --cni-path
with CNI_COMMAND=ADD against the pause container's network namespace
(/proc/PID/ns/net), CNI_CONTAINERID the allocation id, CNI_IFNAME eth0 and
CNI_ARGS with IgnoreUnknown and Nomad's NOMAD_REGION, NOMAD_NAMESPACE,
NOMAD_JOB_ID, NOMAD_GROUP_NAME and NOMAD_ALLOC_ID (each plugin gets the
previous one's result as prevResult); the task containers join that
namespace (--network container:PAUSE), so the namespace is wired before
runsc starts (runsc takes its interfaces at start, DESIGN.md). A plugin
that fails is a dead task ("failed to configure networking for alloc"),
its network undone. When the allocation stops: the tasks' containers go,
then DEL runs (plugins in reverse order), then the pause container.
Without those options the container gets Docker's "none" network (loopback
only). Of the CNI result, the DNS is used as Nomad does since its fix
nomad#20007 (a resolv.conf in the task's directory, bound at
/etc/resolv.conf, as its docker driver does); port mappings are not
modelled.

Nomad Variables: PUT/POST, GET and DELETE /v1/var/:path and GET /v1/vars
answer as Nomad's Variables HTTP API documents them (api-docs/variables:
the variable with Namespace, Path, Items and its indexes; 404 "variable not
found"; 204 on delete; paths checked as Nomad checks them, "nomad/" reserved
but for nomad/jobs and nomad/job-templates; Items required). Each variable
is stored per namespace, in memory, unencrypted.

Templates: a task's Templates are checked against Nomad's API (field names
and types, a source or data, a destination, the change mode). Of Nomad's
template language (consul-template) this server implements ONLY the form
    {{ with nomadVar "PATH" }}TEXT{{ end }}
where TEXT is plain text with {{ .ITEM }} references (a missing item
renders "<no value>", as Go's templates do), read from the allocation's
namespace; anything else fails the task ("unsupported by the contract
server"). Before the task starts it is rendered into the task's directory
at DestPath (mode Perms) and, with Envvars, read back as KEY=VALUE lines
into the task's environment (over its Env, as Nomad does). A template whose
variable does not exist fails the task to start (Nomad's template runner
would block on it: the task never starts).

What it does NOT cover: without --docker-host it does not run the task
("running" is only a state it moves the allocation to), nor render
templates (it still fails a task whose variable is missing). Even with it:
no other template functions, no re-rendering on change, no artifacts,
services, logs API, restarts or health checks; a task that dies after it
started is not noticed. It has one node and one region, no deployments, no
multi-region, no real ACL policies (one token that may do everything, or
none), no leader elections, no per-table indexes (one index for all
state; Nomad allows such spurious wake-ups of blocking queries), no job
versions or updates beyond replacing the job.

Endpoints (Nomad's):
  POST|PUT /v1/jobs                 register ({"Job": {...}})
  GET      /v1/jobs?namespace=&prefix=
  GET      /v1/job/:id              GET /v1/job/:id/allocations (blocking)
  DELETE   /v1/job/:id[?purge=true]
  GET      /v1/evaluation/:id       (blocking)
  GET      /v1/allocation/:id       (blocking)
  PUT|POST /v1/var/:path            ({"Namespace", "Path", "Items"})
  GET      /v1/var/:path            DELETE /v1/var/:path
  GET      /v1/vars?namespace=&prefix=  (blocking)
Control endpoints for tests (not Nomad's), under /_contract/:
  POST /_contract/mode   JSON: {"deny": bool (every API call answers 403),
        "slow_ms": N (every API call waits N ms first), "slow_register_ms": N
        (only registers wait: the job lands after the client gave up), "task_fail": "msg"
        (the next tasks die with that driver failure), "node_memory_mb": N,
        "error_500": bool, "var_error_500": bool (only the Variables API
        answers 500)}; fields not given keep their value
  GET  /_contract/jobs   every job body received, and every deregister
  POST /_contract/alloc-lost/:job   the job's allocation is lost (its node died)
  GET  /_contract/state  jobs, allocations, evaluations, variables ("ns/path") now

Usage: server.py --port-file FILE [--port N] [--token-file F] [--node-name N]
                 [--docker-host unix:///PATH --alloc-dir DIR [--docker /usr/bin/docker]
                  [--cni-path DIR --cni-config-dir DIR]]
                 [--node-pool P] [--namespaces a,b] [--cni-networks a,b]
                 [--allow-runtimes runc,runsc] [--allow-caps all]
                 [--volumes-enabled] [--node-memory-mb N]
                 [--tls-cert F --tls-key F [--tls-client-ca F]]
With --tls-cert it serves HTTPS, as a Nomad agent with tls { http = true }
does; with --tls-client-ca it also requires a client certificate signed by
that CA (verify_https_client = true).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import ssl
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

# ---- Nomad's JSON job specification (the part a service job uses) -------
# type names: str, int, bool, obj (any object), map (object of strings),
# list (any list), [str] (list of strings), or a nested schema dict.
INT = "int"
STR = "str"
BOOL = "bool"
OBJ = "obj"
MAP = "map"
LIST = "list"
STRS = "[str]"

RESTART = {"Interval": INT, "Attempts": INT, "Delay": INT, "Mode": STR, "RenderTemplates": BOOL}
RESCHEDULE = {"Attempts": INT, "Interval": INT, "Delay": INT, "DelayFunction": STR, "MaxDelay": INT,
              "Unlimited": BOOL}
NETWORK = {"Mode": STR, "Device": STR, "CIDR": STR, "IP": STR, "Hostname": STR, "MBits": INT, "DNS": OBJ,
           "ReservedPorts": LIST, "DynamicPorts": LIST, "CNI": OBJ}
RESOURCES = {"CPU": INT, "Cores": INT, "MemoryMB": INT, "MemoryMaxMB": INT, "DiskMB": INT, "Networks": LIST,
             "Devices": LIST, "IOPS": INT, "NUMA": OBJ, "SecretsMB": INT}
# api.Template (the task's Templates)
TEMPLATE = {"SourcePath": STR, "DestPath": STR, "EmbeddedTmpl": STR, "ChangeMode": STR, "ChangeScript": OBJ,
            "ChangeSignal": STR, "Once": BOOL, "Splay": INT, "Perms": STR, "Uid": INT, "Gid": INT, "LeftDelim": STR,
            "RightDelim": STR, "Envvars": BOOL, "VaultGrace": INT, "Wait": OBJ, "ErrMissingKey": BOOL}
# api.Constraint
CONSTRAINT = {"LTarget": STR, "RTarget": STR, "Operand": STR}
CONSTRAINT_OPERANDS = ("=", "==", "is", "!=", "not", ">", ">=", "<", "<=", "distinct_hosts", "distinct_property",
                       "regexp", "set_contains", "set_contains_all", "set_contains_any", "version", "semver",
                       "is_set", "is_not_set")
TASK = {"Name": STR, "Driver": STR, "User": STR, "Lifecycle": OBJ, "Config": OBJ, "Constraints": [CONSTRAINT],
        "Affinities": LIST, "Env": MAP, "Services": LIST, "Resources": RESOURCES, "RestartPolicy": RESTART,
        "Meta": MAP, "KillTimeout": INT, "LogConfig": OBJ, "Artifacts": LIST, "Vault": OBJ, "Templates": [TEMPLATE],
        "DispatchPayload": OBJ, "VolumeMounts": LIST, "Leader": BOOL, "ShutdownDelay": INT, "KillSignal": STR,
        "Kind": STR, "ScalingPolicies": LIST, "CSIPluginConfig": OBJ, "Identity": OBJ, "Identities": LIST,
        "Actions": LIST, "Consul": OBJ}
GROUP = {"Name": STR, "Count": INT, "Constraints": [CONSTRAINT], "Affinities": LIST, "Tasks": LIST, "Spreads": LIST,
         "Volumes": OBJ, "RestartPolicy": RESTART, "ReschedulePolicy": RESCHEDULE, "EphemeralDisk": OBJ,
         "Update": OBJ, "Migrate": OBJ, "Networks": LIST, "Meta": MAP, "Services": LIST, "ShutdownDelay": INT,
         "StopAfterClientDisconnect": INT, "MaxClientDisconnect": INT, "Scaling": OBJ, "Consul": OBJ,
         "Disconnect": OBJ, "PreventRescheduleOnLost": BOOL}
JOB = {"Region": STR, "Namespace": STR, "ID": STR, "Name": STR, "Type": STR, "Priority": INT, "AllAtOnce": BOOL,
       "Datacenters": STRS, "NodePool": STR, "Constraints": [CONSTRAINT], "Affinities": LIST, "TaskGroups": LIST,
       "Update": OBJ, "Multiregion": OBJ, "Spreads": LIST, "Periodic": OBJ, "ParameterizedJob": OBJ,
       "Reschedule": RESCHEDULE, "Migrate": OBJ, "Meta": MAP, "ConsulToken": STR, "VaultToken": STR,
       "Stop": BOOL, "ParentID": STR, "Payload": STR, "UI": OBJ, "Dispatched": BOOL}
# the docker task driver's task config (developer.hashicorp.com/nomad/docs/job-declare/task-driver/docker)
DOCKER_MOUNT = {"type": STR, "target": STR, "source": STR, "readonly": BOOL, "bind_options": OBJ,
                "volume_options": OBJ, "tmpfs_options": OBJ}
DOCKER = {"image": STR, "args": STRS, "command": STR, "runtime": STR, "pids_limit": INT, "cap_add": STRS,
          "cap_drop": STRS, "mount": [DOCKER_MOUNT], "network_mode": STR, "entrypoint": STRS, "privileged": BOOL,
          "volumes": STRS, "labels": MAP, "ulimit": MAP, "security_opt": STRS, "readonly_rootfs": BOOL,
          "hostname": STR, "work_dir": STR, "auth": OBJ, "auth_soft_fail": BOOL, "force_pull": BOOL,
          "image_pull_timeout": STR, "dns_servers": STRS, "dns_search_domains": STRS, "dns_options": STRS,
          "shm_size": INT, "storage_opt": MAP, "sysctl": MAP, "init": BOOL, "interactive": BOOL, "tty": BOOL,
          "userns_mode": STR, "ports": STRS, "cpu_hard_limit": BOOL, "cpu_cfs_period": INT,
          "memory_hard_limit": INT, "logging": OBJ, "devices": LIST, "ipc_mode": STR, "pid_mode": STR,
          "uts_mode": STR, "extra_hosts": STRS, "mac_address": STR, "oom_score_adj": INT, "group_add": STRS,
          "isolation": STR, "healthchecks": OBJ, "cgroupns": STR, "load": STR, "ipv4_address": STR,
          "ipv6_address": STR, "advertise_ipv6_address": BOOL, "cpuset_cpus": STR, "container_exists_attempts": INT}
LINUX_CAPS = {"ALL", "AUDIT_CONTROL", "AUDIT_READ", "AUDIT_WRITE", "BLOCK_SUSPEND", "BPF", "CHECKPOINT_RESTORE",
              "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "IPC_LOCK", "IPC_OWNER", "KILL",
              "LEASE", "LINUX_IMMUTABLE", "MAC_ADMIN", "MAC_OVERRIDE", "MKNOD", "NET_ADMIN", "NET_BIND_SERVICE",
              "NET_BROADCAST", "NET_RAW", "PERFMON", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_ADMIN",
              "SYS_BOOT", "SYS_CHROOT", "SYS_MODULE", "SYS_NICE", "SYS_PACCT", "SYS_PTRACE", "SYS_RAWIO",
              "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "SYSLOG", "WAKE_ALARM"}


class Invalid(Exception):
    pass


def check(value, schema, where):
    """Raises Invalid naming the first field that breaks the schema."""
    if value is None:
        return  # Nomad's JSON jobs carry null for every unset field
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            raise Invalid(f"{where}: expected an object")
        for k, v in value.items():
            if k not in schema:
                raise Invalid(f"{where}: unknown field {k!r} (contract server: Nomad would ignore it)")
            check(v, schema[k], f"{where}.{k}")
        return
    if isinstance(schema, list):
        if not isinstance(value, list):
            raise Invalid(f"{where}: expected a list")
        for i, v in enumerate(value):
            check(v, schema[0], f"{where}[{i}]")
        return
    ok = {
        INT: lambda v: isinstance(v, int) and not isinstance(v, bool),
        STR: lambda v: isinstance(v, str),
        BOOL: lambda v: isinstance(v, bool),
        OBJ: lambda v: isinstance(v, dict),
        MAP: lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
        LIST: lambda v: isinstance(v, list),
        STRS: lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    }[schema](value)
    if not ok:
        raise Invalid(f"{where}: expected {schema}, got {type(value).__name__}")


def validate_job(job):
    """Nomad's own validation of a registered job (the subset that applies)."""
    check(job, JOB, "Job")
    errs = []
    if not job.get("ID"):
        errs.append("Missing job ID")
    elif " " in job["ID"]:
        errs.append("Job ID contains a space")
    if not job.get("Name"):
        errs.append("Missing job name")
    if job.get("Type") not in ("service", "batch", "system", "sysbatch"):
        errs.append(f"Invalid job type: {job.get('Type')!r}")
    if not job.get("TaskGroups"):
        errs.append("Missing job task groups")
    p = job.get("Priority")
    if p is not None and not 1 <= p <= 100:
        errs.append("Job priority must be between [1, 100]")
    # structs.Constraint.Validate: an operand Nomad knows; a comparison needs both sides
    cons = list(job.get("Constraints") or [])
    for g in job.get("TaskGroups") or []:
        if isinstance(g, dict):
            cons += g.get("Constraints") or []
            cons += [c for t in (g.get("Tasks") or []) if isinstance(t, dict) for c in (t.get("Constraints") or [])]
    for c in cons:
        if not isinstance(c, dict):
            continue
        if not c.get("Operand"):
            errs.append("Missing constraint operand")
        elif c["Operand"] not in CONSTRAINT_OPERANDS:
            errs.append(f"Unknown constraint type {c['Operand']!r}")
        elif c["Operand"] in ("=", "==", "is", "!=", "not") and (not c.get("LTarget") or not c.get("RTarget")):
            errs.append("No LTarget or RTarget provided")
    for gi, g in enumerate(job.get("TaskGroups") or []):
        check(g, GROUP, f"Job.TaskGroups[{gi}]")
        if not g.get("Name"):
            errs.append(f"Task group {gi + 1} missing name")
        if g.get("Count") is not None and g["Count"] < 0:
            errs.append(f"Task group {g.get('Name')} count can't be negative")
        rp = g.get("RestartPolicy") or {}
        if rp.get("Mode") not in (None, "delay", "fail"):
            errs.append(f"Unsupported restart mode: {rp.get('Mode')!r}")
        if rp.get("Attempts") is not None and rp["Attempts"] < 0:
            errs.append("restart attempts can't be negative")
        rs = g.get("ReschedulePolicy") or {}
        if rs.get("Attempts") is not None and rs["Attempts"] < 0:
            errs.append("reschedule attempts can't be negative")
        if rs.get("Unlimited") and rs.get("Attempts"):
            errs.append("reschedule: Unlimited and Attempts are exclusive")
        nets = g.get("Networks") or []
        if len(nets) > 1:
            errs.append("Only one network resource may be specified per task group")
        for ni, n in enumerate(nets):
            check(n, NETWORK, f"Job.TaskGroups[{gi}].Networks[{ni}]")
            m = n.get("Mode") or ""
            if not (m in ("", "none", "bridge", "host") or re.fullmatch(r"cni/[A-Za-z0-9_.-]+", m)):
                errs.append(f"Invalid network mode {m!r}")
        tasks = g.get("Tasks") or []
        if not tasks:
            errs.append(f"Task group {g.get('Name')} missing tasks")
        for ti, t in enumerate(tasks):
            check(t, TASK, f"Job.TaskGroups[{gi}].Tasks[{ti}]")
            if not t.get("Name"):
                errs.append(f"Task {ti + 1} missing name")
            if not t.get("Driver"):
                errs.append(f"Task {t.get('Name')} missing driver")
            r = t.get("Resources") or {}
            if r.get("CPU") is not None and r["CPU"] < 1:
                errs.append("minimum CPU value is 1")
            if r.get("MemoryMB") is not None and r["MemoryMB"] < 10:
                errs.append("minimum MemoryMB value is 10")
            if r.get("MemoryMaxMB") and r.get("MemoryMB") and r["MemoryMaxMB"] < r["MemoryMB"]:
                errs.append("MemoryMaxMB value cannot be less than MemoryMB")
            for mi, tm in enumerate(t.get("Templates") or []):
                where = f"Task {t.get('Name')} template {mi + 1}"
                if not tm.get("SourcePath") and not tm.get("EmbeddedTmpl"):
                    errs.append(f"{where}: Must specify a source path or have an embedded template")
                if not tm.get("DestPath"):
                    errs.append(f"{where}: Must specify a destination for the template")
                elif os.path.isabs(tm["DestPath"]) or ".." in tm["DestPath"].split("/"):
                    errs.append(f"{where}: destination escapes the task's directory")
                mode = tm.get("ChangeMode") or "restart"
                if mode not in ("noop", "restart", "signal", "script"):
                    errs.append(f"{where}: Unsupported change mode {mode!r}")
                if mode == "signal" and not tm.get("ChangeSignal"):
                    errs.append(f"{where}: Must specify signal value when change mode is signal")
                if (tm.get("Splay") or 0) < 0:
                    errs.append(f"{where}: Must specify positive splay value")
                if tm.get("Perms") is not None and not re.fullmatch(r"[0-7]{1,4}", tm["Perms"]):
                    errs.append(f"{where}: Failed to parse {tm['Perms']!r} as octal")
            if t.get("Driver") == "docker":
                c = t.get("Config") or {}
                check(c, DOCKER, f"Job.TaskGroups[{gi}].Tasks[{ti}].Config")
                if not c.get("image"):
                    errs.append(f"Task {t.get('Name')}: docker config: image is required")
                for k in ("cap_add", "cap_drop"):
                    for cap in c.get(k) or []:
                        if cap.upper().removeprefix("CAP_") not in LINUX_CAPS:
                            errs.append(f"Task {t.get('Name')}: unknown capability {cap!r} in {k}")
                for mi, mnt in enumerate(c.get("mount") or []):
                    if mnt.get("type", "volume") not in ("bind", "volume", "tmpfs"):
                        errs.append(f"mount {mi}: type must be bind, volume or tmpfs")
                    if not mnt.get("target"):
                        errs.append(f"mount {mi}: target is required")
    if errs:
        raise Invalid(f"{len(errs)} error{'s' if len(errs) > 1 else ''} occurred:\n" +
                      "".join(f"\t* {e}\n" for e in errs))


VAR_PATH = re.compile(r"[a-zA-Z0-9\-_~/]{1,128}")
TMPL_WITH = re.compile(r'\{\{-?\s*with\s+nomadVar\s+"([^"]*)"\s*-?\}\}(.*?)\{\{-?\s*end\s*-?\}\}', re.S)
TMPL_ITEM = re.compile(r"\{\{-?\s*\.([A-Za-z_][A-Za-z0-9_]*)\s*-?\}\}")


class TemplateError(Exception):
    pass


def var_path_error(path):
    """Nomad's validatePath: None when the path is fine."""
    if not VAR_PATH.fullmatch(path or ""):
        return f"invalid path {path!r}"
    parts = path.split("/")
    if parts[0] == "nomad" and (len(parts) == 1 or parts[1] not in ("jobs", "job-templates")):
        return ('"nomad" is a reserved top-level directory path, but you may write variables to "nomad/jobs", '
                '"nomad/job-templates", or below')
    return None


def render_template(tm, ns, variables):
    """The one template form this server implements (see the header):
    the rendered text, or TemplateError. Under the state's lock."""
    src = tm.get("EmbeddedTmpl") or ""
    if tm.get("SourcePath") or tm.get("LeftDelim") not in (None, "{{") or tm.get("RightDelim") not in (None, "}}"):
        raise TemplateError("only an embedded template with the default delimiters is implemented by the contract server")
    out, pos = [], 0
    for m in TMPL_WITH.finditer(src):
        out.append(src[pos:m.start()])
        v = variables.get((ns, m.group(1)))
        if v is None:
            # Nomad's template runner blocks until the variable exists: the task never starts
            raise TemplateError(f'Missing: nomadVar.block({m.group(1)}@{ns}.global): the template blocks on a '
                                f'variable that does not exist')
        body = m.group(2)
        if "{{" in TMPL_ITEM.sub("", body):
            raise TemplateError("template form unsupported by the contract server (only {{ .ITEM }} inside with nomadVar)")
        if any(tm.get("ErrMissingKey") and k not in v["Items"] for k in TMPL_ITEM.findall(body)):
            raise TemplateError("map has no entry for key")
        out.append(TMPL_ITEM.sub(lambda x: v["Items"].get(x.group(1), "<no value>"), body))
        pos = m.end()
    rest = src[pos:]
    if "{{" in rest:
        raise TemplateError("template form unsupported by the contract server (only {{ with nomadVar }})")
    out.append(rest)
    return "".join(out)


def env_lines(text):
    """A rendered env template read back as Nomad does: KEY=VALUE lines
    (blank lines and # comments skipped)."""
    env = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        k, sep, v = line.partition("=")
        if not sep or not k.strip():
            raise TemplateError(f"failed to parse the rendered environment: line {line[:40]!r}")
        env[k.strip()] = v
    return env


def parse_wait(s):
    """Nomad's wait parameter: a Go duration; at most 10 minutes; absent
    or zero means Nomad's default, 5 minutes."""
    if not s:
        return 300.0
    total = 0.0
    for num, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", s):
        total += float(num) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    if not re.fullmatch(r"((\d+(\.\d+)?)(ms|s|m|h))+", s):
        raise Invalid(f"Invalid wait time {s!r}")
    return min(total, 600.0) if total > 0 else 300.0


class State:
    def __init__(self, args):
        self.args = args
        self.cv = threading.Condition()
        self.index = 1
        self.jobs = {}       # (ns, id) -> job dict (with Nomad's server-side fields)
        self.allocs = {}     # id -> alloc
        self.evals = {}      # id -> eval
        self.received = []   # every register body
        self.deregistered = []
        self.mode = {"deny": False, "slow_ms": 0, "slow_register_ms": 0, "task_fail": "", "node_memory_mb": args.node_memory_mb,
                     "error_500": False, "var_error_500": False}
        self.vars = {}       # (ns, path) -> variable (Namespace, Path, Items, indexes, times)
        self.var_log = []    # every variable write and delete (no Items)
        self.node_id = str(uuid.uuid4())
        self.containers = {}  # alloc id -> [docker container names]
        self.networks = {}  # alloc id -> its CNI network (pause container, netns, plugins added)

    def bump(self):
        """Under self.cv: a change; wakes every blocking query."""
        self.index += 1
        self.cv.notify_all()
        return self.index

    def later(self, seconds, fn):
        t = threading.Timer(seconds, self._locked, args=(fn,))
        t.daemon = True
        t.start()

    def _locked(self, fn):
        with self.cv:
            fn()


def now_ns():
    return time.time_ns()


class Handler(BaseHTTPRequestHandler):
    server_version = "sbx-nomad-contract/1"
    st: State = None

    def setup(self):
        # the TLS handshake happens here, in the request's own thread, with
        # a bound: a silent client never holds up the accept loop
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(10)
            self.request.do_handshake()
        super().setup()

    def log_message(self, fmt, *a):
        sys.stderr.write("contract: " + (fmt % a) + "\n")

    # -- answers ----------------------------------------------------------
    def send(self, code, body, index=None, ctype="application/json"):
        data = body if isinstance(body, bytes) else (json.dumps(body).encode() if ctype == "application/json"
                                                     else body.encode())
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        if index is not None:
            self.send_header("X-Nomad-Index", str(index))
            self.send_header("X-Nomad-KnownLeader", "true")
            self.send_header("X-Nomad-LastContact", "0")
        self.end_headers()
        self.wfile.write(data)

    def text(self, code, msg):
        self.send(code, msg, ctype="text/plain; charset=utf-8")

    # -- plumbing ---------------------------------------------------------
    def route(self, method):
        u = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
        st = self.st
        if u.path.startswith("/_contract/"):
            return self.control(method, u.path, q)
        if not u.path.startswith("/v1/"):
            return self.text(404, "Invalid URL path")
        slow = st.mode["slow_ms"]
        if slow:
            time.sleep(slow / 1000)
        if st.mode["deny"]:
            return self.text(403, "Permission denied")
        if st.args.token and self.headers.get("X-Nomad-Token", "") != st.args.token:
            return self.text(403, "ACL token not found")
        if st.mode["error_500"]:
            return self.text(500, "rpc error: No cluster leader")
        region = q.get("region", "")
        if region and region != st.args.region:
            return self.text(500, "No path to region")
        try:
            return self.api(method, u.path, q)
        except Invalid as e:
            return self.text(400, str(e))

    def body_json(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw or b"null")
        except ValueError as e:
            raise Invalid(f"Failed to decode request body: {e}")

    def blocking(self, q, read):
        """Runs read() under the lock once the index passes ?index (or the
        wait ends); answers with the current index."""
        st = self.st
        want = int(q.get("index") or 0)
        wait = parse_wait(q.get("wait", "")) if "index" in q else 0
        deadline = time.monotonic() + wait
        with st.cv:
            while want and st.index <= want:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                st.cv.wait(left)
            code, body = read()
            idx = st.index
        if code == 200:
            self.send(200, body, index=idx)
        else:
            self.text(code, body)

    def ns_of(self, q, job=None):
        ns = q.get("namespace") or (job or {}).get("Namespace") or "default"
        return ns

    # -- Nomad's API ------------------------------------------------------
    def api(self, method, path, q):
        st = self.st
        if path == "/v1/jobs" and method in ("POST", "PUT"):
            if st.mode["slow_register_ms"]:
                time.sleep(st.mode["slow_register_ms"] / 1000)
            return self.register(q)
        if path == "/v1/jobs" and method == "GET":
            ns = q.get("namespace") or "default"
            pre = q.get("prefix", "")

            def read():
                return 200, [self.stub(j) for (n, i), j in sorted(st.jobs.items())
                             if (ns == "*" or n == ns) and i.startswith(pre)]
            return self.blocking(q, read)
        m = re.fullmatch(r"/v1/job/([^/]+)(/allocations)?", path)
        if m:
            jid, sub = m.group(1), m.group(2)
            ns = self.ns_of(q)
            if method == "GET" and not sub:
                return self.blocking(q, lambda: (200, st.jobs[(ns, jid)]) if (ns, jid) in st.jobs
                                     else (404, "job not found"))
            if method == "GET" and sub:
                def read():
                    # Nomad lists a job's allocations by job id without
                    # looking the job up: a purged job has none, not a 404
                    return 200, [self.alloc_stub(a) for a in st.allocs.values()
                                 if a["JobID"] == jid and a["Namespace"] == ns]
                return self.blocking(q, read)
            if method == "DELETE" and not sub:
                return self.deregister(ns, jid, q.get("purge") == "true")
        if path == "/v1/vars" or path.startswith("/v1/var/"):
            return self.variables(method, path, q)
        m = re.fullmatch(r"/v1/evaluation/([^/]+)", path)
        if m and method == "GET":
            eid = m.group(1)
            return self.blocking(q, lambda: (200, st.evals[eid]) if eid in st.evals else (404, "eval not found"))
        m = re.fullmatch(r"/v1/allocation/([^/]+)", path)
        if m and method == "GET":
            aid = m.group(1)
            return self.blocking(q, lambda: (200, st.allocs[aid]) if aid in st.allocs else (404, "alloc not found"))
        return self.text(405 if path.startswith("/v1/job") else 404, "Invalid method or URL path")

    def variables(self, method, path, q):
        """Nomad's Variables HTTP API (api-docs/variables/variables)."""
        st = self.st
        if q.get("cas") is not None and not q["cas"].isdigit():
            raise Invalid(f"can not parse cas: {q['cas']!r}")
        if st.mode["var_error_500"]:
            return self.text(500, "rpc error: variables: No cluster leader")
        if path == "/v1/vars":
            if method != "GET":
                return self.text(405, "Invalid method")
            ns, pre = q.get("namespace") or "default", q.get("prefix", "")

            def read():
                return 200, [{k: v[k] for k in ("Namespace", "Path", "CreateIndex", "ModifyIndex", "CreateTime",
                                                "ModifyTime")}
                             for (n, p), v in sorted(st.vars.items()) if (ns == "*" or n == ns) and p.startswith(pre)]
            return self.blocking(q, read)
        vpath = path[len("/v1/var/"):]
        if not vpath:
            return self.text(400, "missing variable path")
        ns = q.get("namespace") or "default"
        if method == "GET":
            return self.blocking(q, lambda: (200, st.vars[(ns, vpath)]) if (ns, vpath) in st.vars
                                 else (404, "variable not found"))
        if method in ("PUT", "POST"):
            body = self.body_json()
            if not isinstance(body, dict):
                raise Invalid("Request decode failed: expected a variable object")
            check(body, {"Namespace": STR, "Path": STR, "Items": MAP, "CreateIndex": INT, "ModifyIndex": INT,
                         "CreateTime": INT, "ModifyTime": INT, "Lock": OBJ}, "Variable")
            if not body.get("Items"):
                raise Invalid("variable missing required Items object")
            if q.get("namespace") and body.get("Namespace") and q["namespace"] != body["Namespace"]:
                raise Invalid("Variable namespace does not match request namespace")
            ns = q.get("namespace") or body.get("Namespace") or "default"
            if ns == "*":
                raise Invalid('can not target wildcard ("*")namespace')
            why = var_path_error(vpath)
            if why:
                raise Invalid(why)
            if ns not in st.args.namespaces:
                return self.text(500, f'namespace "{ns}" does not exist')
            with st.cv:
                old = st.vars.get((ns, vpath))
                if q.get("cas") is not None and int(q["cas"] or 0) != (old["ModifyIndex"] if old else 0):
                    return self.send(409, old or {"Namespace": ns, "Path": vpath}, index=st.index)
                idx = st.bump()
                v = {"Namespace": ns, "Path": vpath, "CreateIndex": old["CreateIndex"] if old else idx,
                     "ModifyIndex": idx, "CreateTime": old["CreateTime"] if old else now_ns(), "ModifyTime": now_ns(),
                     "Items": dict(body["Items"])}
                st.vars[(ns, vpath)] = v
                st.var_log.append({"op": "put", "Namespace": ns, "Path": vpath})
                return self.send(200, v, index=idx)
        if method == "DELETE":
            with st.cv:
                old = st.vars.get((ns, vpath))
                if q.get("cas") is not None and int(q["cas"] or 0) != (old["ModifyIndex"] if old else 0):
                    return self.send(409, old or {"Namespace": ns, "Path": vpath}, index=st.index)
                st.vars.pop((ns, vpath), None)
                st.var_log.append({"op": "delete", "Namespace": ns, "Path": vpath, "found": old is not None})
                idx = st.bump()
            # Nomad answers a delete with 204 whether the variable was there or not
            self.send_response(204)
            self.send_header("X-Nomad-Index", str(idx))
            self.end_headers()
            return None
        return self.text(400, "Invalid method")

    def stub(self, j):
        return {k: j.get(k) for k in ("ID", "ParentID", "Name", "Namespace", "Datacenters", "NodePool", "Type",
                                      "Priority", "Periodic", "ParameterizedJob", "Stop", "Status",
                                      "StatusDescription", "CreateIndex", "ModifyIndex", "JobModifyIndex",
                                      "SubmitTime", "Meta")} | {"JobSummary": None}

    def alloc_stub(self, a):
        return {k: a[k] for k in ("ID", "EvalID", "Name", "Namespace", "NodeID", "NodeName", "JobID", "JobType",
                                  "JobVersion", "TaskGroup", "DesiredStatus", "DesiredDescription",
                                  "ClientStatus", "ClientDescription", "TaskStates", "CreateIndex",
                                  "ModifyIndex", "CreateTime", "ModifyTime", "FollowupEvalID")}

    def register(self, q):
        st = self.st
        body = self.body_json()
        if not isinstance(body, dict) or not isinstance(body.get("Job"), dict):
            raise Invalid("Job must be specified")
        job = body["Job"]
        with st.cv:
            st.received.append({"body": body, "query": q, "token": self.headers.get("X-Nomad-Token", "")})
        validate_job(job)
        ns = job.get("Namespace") or q.get("namespace") or "default"
        if q.get("namespace") and job.get("Namespace") and q["namespace"] != job["Namespace"]:
            raise Invalid("Job namespace does not match request namespace")
        if ns not in st.args.namespaces:
            raise Invalid(f'job "{job["ID"]}" is in nonexistent namespace "{ns}"')
        with st.cv:
            idx = st.bump()
            old = st.jobs.get((ns, job["ID"]))
            stored = dict(job)
            stored.update({"Namespace": ns, "Region": job.get("Region") or st.args.region,
                           "NodePool": job.get("NodePool") or "default", "Status": "pending",
                           "Stop": False, "CreateIndex": old["CreateIndex"] if old else idx, "ModifyIndex": idx,
                           "JobModifyIndex": idx, "SubmitTime": now_ns(),
                           "Version": (old["Version"] + 1) if old else 0})
            st.jobs[(ns, job["ID"])] = stored
            ev = {"ID": str(uuid.uuid4()), "Namespace": ns, "Priority": job.get("Priority") or 50,
                  "Type": job["Type"], "TriggeredBy": "job-register", "JobID": job["ID"], "JobModifyIndex": idx,
                  "Status": "pending", "StatusDescription": "", "FailedTGAllocs": None, "BlockedEval": "",
                  "CreateIndex": idx, "ModifyIndex": idx, "CreateTime": now_ns(), "ModifyTime": now_ns()}
            st.evals[ev["ID"]] = ev
            st.later(0.05, lambda: self.schedule(ns, job["ID"], ev["ID"]))
        self.send(200, {"EvalID": ev["ID"], "EvalCreateIndex": idx, "JobModifyIndex": idx, "Warnings": "",
                        "Index": idx, "LastContact": 0, "KnownLeader": True}, index=idx)

    def schedule(self, ns, jid, eid):
        """Under st.cv: the scheduler's work for one evaluation."""
        st, a = self.st, self.st.args
        job, ev = st.jobs.get((ns, jid)), st.evals[eid]
        if not job:
            ev.update(Status="canceled", ModifyIndex=st.bump())
            return
        failed = {}
        for g in job["TaskGroups"]:
            metric = {"NodesEvaluated": 0, "NodesFiltered": 0, "NodesInPool": 0, "NodesAvailable": {"dc1": 1},
                      "ClassFiltered": None, "ConstraintFiltered": None, "NodesExhausted": 0,
                      "ClassExhausted": None, "DimensionExhausted": None, "QuotaExhausted": None,
                      "ResourcesExhausted": None, "Scores": None, "AllocationTime": 1000, "CoalescedFailures": 0}
            if job["NodePool"] not in (a.node_pool, "all"):
                failed[g["Name"]] = metric  # no node in that pool
                continue
            metric["NodesInPool"] = metric["NodesEvaluated"] = 1
            # the constraints on the one node's attributes it knows (the
            # scheduler's feasibility check; an attribute it lacks fails)
            attrs = {"${node.unique.name}": a.node_name, "${node.unique.id}": st.node_id,
                     "${node.pool}": a.node_pool, "${node.datacenter}": "dc1"}
            cons = (job.get("Constraints") or []) + (g.get("Constraints") or []) + \
                [c for t in g["Tasks"] for c in (t.get("Constraints") or [])]
            unmet = None
            for c in cons:
                op, lv = c.get("Operand"), attrs.get(c.get("LTarget"))
                if op in ("=", "==", "is"):
                    met = lv is not None and lv == c.get("RTarget")
                elif op in ("!=", "not"):
                    met = lv != c.get("RTarget")
                else:
                    met = True  # not one this contract server evaluates
                if not met:
                    unmet = f'{c.get("LTarget")} {op} {c.get("RTarget")}'
                    break
            if unmet:
                metric["NodesFiltered"] = 1
                metric["ConstraintFiltered"] = {unmet: 1}
                failed[g["Name"]] = metric
                continue
            nets = [n.get("Mode", "") for n in (g.get("Networks") or [])]
            missing = [m for m in nets if m.startswith("cni/") and m[4:] not in a.cni_networks]
            if missing:
                metric["NodesFiltered"] = 1
                metric["ConstraintFiltered"] = {f"missing network {missing[0]}": 1}
                failed[g["Name"]] = metric
                continue
            mem = sum(((t.get("Resources") or {}).get("MemoryMB") or 300) for t in g["Tasks"])
            if mem > st.mode["node_memory_mb"]:
                metric["NodesExhausted"] = 1
                metric["DimensionExhausted"] = {"memory": 1}
                failed[g["Name"]] = metric
        idx = st.bump()
        if failed:
            blocked = {"ID": str(uuid.uuid4()), "Namespace": ns, "JobID": jid, "Status": "blocked",
                       "StatusDescription": "created to place remaining allocations", "TriggeredBy": "queued-allocs",
                       "Type": job["Type"], "Priority": ev["Priority"], "PreviousEval": eid, "FailedTGAllocs": None,
                       "CreateIndex": idx, "ModifyIndex": idx}
            st.evals[blocked["ID"]] = blocked
            ev.update(Status="complete", FailedTGAllocs=failed, BlockedEval=blocked["ID"], ModifyIndex=idx,
                      QueuedAllocations={g: 1 for g in failed})
            job.update(Status="pending", ModifyIndex=idx)
            return
        for g in job["TaskGroups"]:
            for n in range(g.get("Count", 1) if g.get("Count") is not None else 1):
                aid = str(uuid.uuid4())
                st.allocs[aid] = {
                    "ID": aid, "EvalID": eid, "Name": f"{jid}.{g['Name']}[{n}]", "Namespace": ns,
                    "NodeID": st.node_id, "NodeName": a.node_name, "JobID": jid, "JobType": job["Type"],
                    "JobVersion": job["Version"], "TaskGroup": g["Name"], "DesiredStatus": "run",
                    "DesiredDescription": "", "ClientStatus": "pending", "ClientDescription": "",
                    "TaskStates": {t["Name"]: self.task_state("pending", [("Received", "Task received by client")])
                                   for t in g["Tasks"]},
                    "CreateIndex": idx, "ModifyIndex": idx, "CreateTime": now_ns(), "ModifyTime": now_ns(),
                    "FollowupEvalID": "", "Job": job}
                st.later(0.15, lambda aid=aid, g=g: self.client_runs(aid, g))
        ev.update(Status="complete", ModifyIndex=idx)
        job.update(Status="running", ModifyIndex=idx)

    @staticmethod
    def task_state(state, events, failed=False):
        return {"State": state, "Failed": failed, "Restarts": 0, "LastRestart": None, "StartedAt": None,
                "FinishedAt": None,
                "Events": [{"Type": t, "Time": now_ns(), "DisplayMessage": m, "Details": {}, "DriverError": "",
                            "FailsTask": failed and i == len(events) - 1} for i, (t, m) in enumerate(events)]}

    def client_runs(self, aid, group):
        """Under st.cv: the Nomad client starts the group's tasks with its
        docker plugin, configured as doc/nomad.md says (or not)."""
        st, a = self.st, self.st.args
        al = st.allocs.get(aid)
        if not al or al["DesiredStatus"] != "run":
            return
        why = ""
        for t in group["Tasks"]:
            c = t.get("Config") or {}
            if t["Driver"] != "docker":
                why = f'missing drivers: driver "{t["Driver"]}" is not detected on the client'
            elif (c.get("runtime") or "runc") not in a.allow_runtimes:
                why = (f'failed to create container: runtime "{c.get("runtime")}" is not allowed '
                       f'(allow_runtimes = {a.allow_runtimes})')
            elif any(x.lower() != "all" and "all" not in a.allow_caps and x.lower() not in a.allow_caps
                     for x in c.get("cap_add") or []) or ("ALL" in (c.get("cap_add") or []) and
                                                         "all" not in a.allow_caps):
                why = "failed to create container: driver does not allow the following capabilities: " + \
                      ", ".join(c.get("cap_add") or [])
            elif any(m.get("type") == "bind" for m in c.get("mount") or []) and not a.volumes_enabled:
                why = "failed to create container: volumes are not enabled; cannot mount host paths"
            elif st.mode["task_fail"]:
                why = st.mode["task_fail"]
            else:
                try:  # the template hook runs before the driver starts the task
                    self.task_templates(t, al["Namespace"])
                except TemplateError as e:
                    why = f"Template failed: {e}"
            if why:
                break
        if not why and a.docker_host:
            # the docker driver's work takes seconds (a pull): outside the lock
            idx = st.bump()
            al.update(ModifyIndex=idx,
                      TaskStates={t["Name"]: self.task_state("pending", [("Received", "Task received by client"),
                                                                        ("Task Setup", "Building Task Directory"),
                                                                        ("Driver", "Downloading image")])
                                  for t in group["Tasks"]})
            th = threading.Thread(target=self.docker_runs, args=(aid, group), daemon=True)
            th.start()
            return
        self.client_done(al, group, why)

    def task_templates(self, t, ns):
        """Under st.cv: the task's templates rendered, [(DestPath, perms, text)]
        and the environment they give (Envvars), or TemplateError."""
        files, env = [], {}
        for tm in t.get("Templates") or []:
            text = render_template(tm, ns, self.st.vars)
            files.append((tm["DestPath"], int(tm.get("Perms") or "0644", 8), text))
            if tm.get("Envvars"):
                env.update(env_lines(text))
        return files, env

    def client_done(self, al, group, why):
        """Under st.cv: the allocation's tasks run, or failed with why."""
        st = self.st
        idx = st.bump()
        if why:
            # Nomad's template hook kills the task with a "Killing" event
            etype = "Killing" if why.startswith("Template failed") else "Driver Failure"
            al.update(ClientStatus="failed", ClientDescription="Failed tasks", ModifyIndex=idx,
                      TaskStates={t["Name"]: self.task_state("dead", [("Received", "Task received by client"),
                                                                     (etype, why)], failed=True)
                                  for t in group["Tasks"]})
        else:
            al.update(ClientStatus="running", ClientDescription="Tasks are running", ModifyIndex=idx,
                      TaskStates={t["Name"]: self.task_state("running", [("Received", "Task received by client"),
                                                                        ("Task Setup", "Building Task Directory"),
                                                                        ("Started", "Task started by client")])
                                  for t in group["Tasks"]})

    # -- the docker driver (--docker-host) ---------------------------------
    @staticmethod
    def docker(args, timeout=120):
        a = Handler.st.args
        r = subprocess.run([a.docker, "-H", a.docker_host] + args, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=timeout)
        return r.returncode, (r.stderr.strip().splitlines() or [""])[-1]

    # -- CNI networking (--cni-path, --cni-config-dir) ---------------------
    @staticmethod
    def cni_conflist(name):
        """The configuration list named name in the client's cni_config_dir
        (files in lexical order, as libcni loads them)."""
        d = Handler.st.args.cni_config_dir
        for f in sorted(os.listdir(d)):
            if not f.endswith((".conflist", ".conf", ".json")):
                continue
            with open(os.path.join(d, f)) as fh:
                c = json.load(fh)
            if c.get("name") == name:
                return c if "plugins" in c else {"name": name, "cniVersion": c.get("cniVersion", "0.4.0"),
                                                 "plugins": [c]}
        raise OSError(f"no CNI configuration named {name!r} in {d}")

    @staticmethod
    def cni_exec(cmd, conflist, plugin, net, prev=None):
        a = Handler.st.args
        conf = dict(plugin, name=conflist["name"], cniVersion=conflist.get("cniVersion", "0.4.0"))
        if prev is not None:
            conf["prevResult"] = prev
        env = {"CNI_COMMAND": cmd, "CNI_CONTAINERID": net["aid"], "CNI_NETNS": net["netns"], "CNI_IFNAME": "eth0",
               "CNI_ARGS": net["args"], "CNI_PATH": a.cni_path, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        exe = os.path.join(a.cni_path, plugin["type"])
        r = subprocess.run([exe], input=json.dumps(conf), env=env, capture_output=True, text=True, timeout=60)
        out = r.stdout.strip()
        if r.returncode:
            try:
                e = json.loads(out)
                msg = f'{e.get("msg")} (code {e.get("code")})'
            except ValueError:
                msg = (out or r.stderr.strip() or f"exit {r.returncode}")[:300]
            raise OSError(f'plugin type="{plugin["type"]}" failed ({cmd}): {msg}')
        return json.loads(out) if cmd == "ADD" and out else prev

    def cni_setup(self, aid, group, image, net):
        """The pause container and ADD: net["netns"] wired, or OSError."""
        name = f"nomad_init_{aid}"
        net["pause"] = name
        rc, err = self.docker(["run", "-d", "--name", name, "--label", "sbx-nomad-contract=1", "--network", "none",
                               "--entrypoint", "sleep", image, "infinity"])
        if rc:
            raise OSError(f"failed to create the network namespace: {err}")
        r = subprocess.run([self.st.args.docker, "-H", self.st.args.docker_host, "inspect", "-f", "{{.State.Pid}}",
                            name], capture_output=True, text=True, timeout=60)
        pid = r.stdout.strip()
        if r.returncode or not pid.isdigit() or pid == "0":
            raise OSError(f"failed to create the network namespace: no pid ({r.stderr.strip()})")
        net["netns"] = f"/proc/{pid}/ns/net"
        net["conflist"] = self.cni_conflist(net["mode"][4:])
        prev = None
        for p in net["conflist"]["plugins"]:
            net["added"].append(p)  # a failed ADD is DELeted too, as CNI asks of runtimes
            prev = self.cni_exec("ADD", net["conflist"], p, net, prev)
        net["dns"] = ((prev or {}).get("dns") or {})

    def cni_teardown(self, net):
        """DEL, plugins in reverse order (errors logged: Nomad goes on), then the pause container."""
        for p in reversed(net.get("added") or []):
            try:
                self.cni_exec("DEL", net["conflist"], p, net)
            except (OSError, ValueError, subprocess.SubprocessError) as e:
                sys.stderr.write(f"contract server: CNI DEL for {net['aid']}: {e}\n")
        net["added"] = []
        if net.get("pause"):
            self.docker(["rm", "-f", net["pause"]], timeout=60)

    def docker_runs(self, aid, group):
        """The client's docker driver starts the group's tasks (no lock held)."""
        st, a = self.st, self.st.args
        why, names = "", []
        adir = os.path.join(a.alloc_dir, aid)
        with st.cv:
            al = st.allocs.get(aid)
            env0 = {"NOMAD_ALLOC_ID": aid, "NOMAD_ALLOC_DIR": "/alloc", "NOMAD_TASK_DIR": "/local",
                    "NOMAD_SECRETS_DIR": "/secrets", "NOMAD_JOB_ID": al["JobID"] if al else "",
                    "NOMAD_NAMESPACE": al["Namespace"] if al else "", "NOMAD_GROUP_NAME": group["Name"]}
            st.containers[aid] = names
            rendered = {}
            for t in group["Tasks"]:
                try:
                    rendered[t["Name"]] = self.task_templates(t, env0["NOMAD_NAMESPACE"])
                except TemplateError as e:
                    rendered[t["Name"]] = e
            mode = ((group.get("Networks") or [{}])[0].get("Mode") or "")
            net = None
            if mode.startswith("cni/") and a.cni_config_dir:
                # Nomad leaves out a value with a semicolon (its docs)
                args = [("IgnoreUnknown", "true"), ("NOMAD_REGION", a.region), ("NOMAD_NAMESPACE", env0["NOMAD_NAMESPACE"]),
                        ("NOMAD_JOB_ID", env0["NOMAD_JOB_ID"]), ("NOMAD_GROUP_NAME", group["Name"]), ("NOMAD_ALLOC_ID", aid)]
                net = {"aid": aid, "mode": mode, "netns": "", "added": [],
                       "args": ";".join(f"{k}={v}" for k, v in args if ";" not in v)}
                st.networks[aid] = net
        netmode = "none"
        try:
            os.makedirs(os.path.join(adir, "alloc"), mode=0o755, exist_ok=True)
            if net:
                img = (group["Tasks"][0].get("Config") or {}).get("image", "")
                rc, err = self.docker(["image", "inspect", img])
                if rc:
                    rc, err = self.docker(["pull", "-q", img])
                if rc:
                    raise OSError(f"failed to create the network namespace: pull {img}: {err}")
                try:
                    self.cni_setup(aid, group, img, net)
                except (OSError, ValueError, subprocess.SubprocessError) as e:
                    raise OSError(f'failed to setup alloc: pre-run hook "network" failed: failed to configure '
                                  f'networking for alloc: {e}')
                netmode = f'container:{net["pause"]}'
            for t in group["Tasks"]:
                c, r = t.get("Config") or {}, t.get("Resources") or {}
                for sub in ("local", "secrets"):
                    os.makedirs(os.path.join(adir, t["Name"], sub), mode=0o755, exist_ok=True)
                tr = rendered.get(t["Name"]) or ([], {})
                if isinstance(tr, TemplateError):
                    why = f"Template failed: {tr}"
                    break
                tfiles, tenv = tr
                for dest, perms, text in tfiles:
                    fp = os.path.join(adir, t["Name"], dest)
                    os.makedirs(os.path.dirname(fp), mode=0o755, exist_ok=True)
                    fd = os.open(fp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, perms)
                    with os.fdopen(fd, "w") as fh:
                        fh.write(text)
                    os.chmod(fp, perms)
                # as Nomad's docker driver: pulled when missing (or force_pull)
                rc, err = self.docker(["image", "inspect", c["image"]])
                if rc or c.get("force_pull"):
                    rc, err = self.docker(["pull", "-q", c["image"]])
                if rc:
                    why = f'Failed to pull `{c["image"]}`: {err}'
                    break
                name = f'{t["Name"]}-{aid}'
                cmd = ["run", "-d", "--name", name, "--label", "sbx-nomad-contract=1",
                       "--runtime", c.get("runtime") or "runc", "--network", netmode,
                       "-v", f'{adir}/alloc:/alloc', "-v", f'{adir}/{t["Name"]}/local:/local',
                       "-v", f'{adir}/{t["Name"]}/secrets:/secrets']
                if c.get("pids_limit"):
                    cmd += ["--pids-limit", str(c["pids_limit"])]
                for x in c.get("cap_drop") or []:
                    cmd += ["--cap-drop", x]
                for x in c.get("cap_add") or []:
                    cmd += ["--cap-add", x]
                for m in c.get("mount") or []:
                    spec = f'type={m.get("type", "volume")},source={m.get("source", "")},target={m["target"]}'
                    cmd += ["--mount", spec + (",readonly" if m.get("readonly") else "")]
                if net and net.get("dns", {}).get("nameservers"):
                    # Nomad threads the DNS a CNI plugin returns into the task
                    # (nomad#20007); its docker driver writes it as the task's
                    # resolv.conf and binds it at /etc/resolv.conf
                    d = net["dns"]
                    rc_path = os.path.join(adir, t["Name"], "resolv.conf")
                    with open(rc_path, "w") as fh:
                        fh.write("".join(f"nameserver {x}\n" for x in d["nameservers"]))
                        if d.get("search"):
                            fh.write("search " + " ".join(d["search"]) + "\n")
                        if d.get("options"):
                            fh.write("options " + " ".join(d["options"]) + "\n")
                    cmd += ["--mount", f"type=bind,source={rc_path},target=/etc/resolv.conf,readonly"]
                if r.get("CPU"):
                    cmd += ["--cpu-shares", str(r["CPU"])]
                if r.get("MemoryMB"):
                    hard = r.get("MemoryMaxMB") or r["MemoryMB"]
                    cmd += ["--memory", f"{hard}m", "--memory-reservation", f'{r["MemoryMB"]}m']
                # a template's environment over the task's Env, as Nomad's task env builder does
                for k, v in (list(env0.items()) + [("NOMAD_TASK_NAME", t["Name"])] + list((t.get("Env") or {}).items())
                             + list(tenv.items())):
                    cmd += ["-e", f"{k}={v}"]
                if c.get("entrypoint"):
                    cmd += ["--entrypoint", c["entrypoint"][0]]
                cmd.append(c["image"])
                cmd += ([c["command"]] if c.get("command") else []) + (c.get("args") or [])
                names.append(name)
                rc, err = self.docker(cmd)
                if rc:
                    why = f"failed to start task: {err}"
                    break
        except (OSError, subprocess.SubprocessError) as e:
            why = str(e) if str(e).startswith("failed to ") else f"failed to start task: {e}"
        with st.cv:
            al = st.allocs.get(aid)
            gone = not al or al["DesiredStatus"] != "run"
            if not gone:
                self.client_done(al, group, why)
        if gone or why:
            # a deregister meanwhile found no container yet: this one's to remove
            self.docker_stop(aid, names)

    def docker_stop(self, aid, names=None):
        """The allocation stops: its containers and its directory go (no lock held)."""
        st, a = self.st, self.st.args
        with st.cv:
            names = list(names or []) + st.containers.pop(aid, [])
            net = st.networks.pop(aid, None)
        for n in sorted(set(names)):
            self.docker(["rm", "-f", n], timeout=60)
        if net:
            self.cni_teardown(net)
        shutil.rmtree(os.path.join(a.alloc_dir, aid), ignore_errors=True)

    def stop_later(self, aids):
        if self.st.args.docker_host and aids:
            threading.Thread(target=lambda: [self.docker_stop(x) for x in aids], daemon=True).start()

    def deregister(self, ns, jid, purge):
        st = self.st
        with st.cv:
            st.deregistered.append({"ID": jid, "Namespace": ns, "purge": purge, "found": (ns, jid) in st.jobs})
            if (ns, jid) not in st.jobs:
                return self.text(404, "job not found")
            idx = st.bump()
            eid = str(uuid.uuid4())
            st.evals[eid] = {"ID": eid, "Namespace": ns, "JobID": jid, "Status": "complete",
                             "TriggeredBy": "job-deregister", "Type": st.jobs[(ns, jid)]["Type"],
                             "FailedTGAllocs": None, "CreateIndex": idx, "ModifyIndex": idx}
            stopped = []
            for aid, al in list(st.allocs.items()):
                if al["JobID"] == jid and al["Namespace"] == ns:
                    stopped.append(aid)
                    if purge:
                        del st.allocs[aid]
                    else:
                        al.update(DesiredStatus="stop", ClientStatus="complete", ModifyIndex=idx)
            if purge:
                del st.jobs[(ns, jid)]
            else:
                st.jobs[(ns, jid)].update(Stop=True, Status="dead", ModifyIndex=idx)
        self.stop_later(stopped)
        self.send(200, {"EvalID": eid, "EvalCreateIndex": idx, "JobModifyIndex": idx, "Index": idx,
                        "LastContact": 0, "KnownLeader": True}, index=idx)

    # -- control (tests only) ---------------------------------------------
    def control(self, method, path, q):
        st = self.st
        if path == "/_contract/mode" and method == "POST":
            body = self.body_json() or {}
            with st.cv:
                for k, v in body.items():
                    if k not in st.mode:
                        return self.text(400, f"unknown mode {k}")
                    st.mode[k] = v
                return self.send(200, st.mode)
        if path == "/_contract/jobs" and method == "GET":
            with st.cv:
                return self.send(200, {"registered": st.received, "deregistered": st.deregistered,
                                       "variables": st.var_log})
        if path == "/_contract/state" and method == "GET":
            with st.cv:
                return self.send(200, {"index": st.index, "jobs": [f"{n}/{i}" for n, i in st.jobs],
                                       "allocs": {k: {x: v[x] for x in ("JobID", "ClientStatus", "DesiredStatus")}
                                                  for k, v in st.allocs.items()},
                                       "evals": {k: v["Status"] for k, v in st.evals.items()},
                                       "vars": [f"{n}/{p}" for n, p in sorted(st.vars)]})
        m = re.fullmatch(r"/_contract/alloc-lost/([^/]+)", path)
        if m and method == "POST":
            with st.cv:
                idx = st.bump()
                n = 0
                for al in st.allocs.values():
                    if al["JobID"] == m.group(1):
                        al.update(ClientStatus="lost", ClientDescription="alloc is lost since its node is down",
                                  DesiredStatus="stop", ModifyIndex=idx)
                        n += 1
                # as with a node Nomad's servers lost contact with, the task
                # may run on: its container goes when the job is deregistered
                return self.send(200, {"lost": n})
        return self.text(404, "no such control endpoint")

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_PUT(self):
        self.route("PUT")

    def do_DELETE(self):
        self.route("DELETE")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--token-file", default="")
    ap.add_argument("--region", default="global")
    ap.add_argument("--node-name", default="nomad-client-1")
    ap.add_argument("--node-pool", default="sandbox")
    ap.add_argument("--namespaces", default="default,sandboxes")
    ap.add_argument("--cni-networks", default="sbx")
    ap.add_argument("--allow-runtimes", default="runc,runsc")
    ap.add_argument("--allow-caps", default="all")
    ap.add_argument("--volumes-enabled", action="store_true")
    ap.add_argument("--node-memory-mb", type=int, default=8192)
    ap.add_argument("--tls-cert", default="")
    ap.add_argument("--tls-key", default="")
    ap.add_argument("--tls-client-ca", default="")
    ap.add_argument("--docker-host", default="", help="run tasks through this Docker engine (unix:///PATH)")
    ap.add_argument("--docker", default="/usr/bin/docker")
    ap.add_argument("--alloc-dir", default="", help="the client's data_dir/alloc")
    ap.add_argument("--cni-path", default="", help="the client's cni_path (CNI plugins)")
    ap.add_argument("--cni-config-dir", default="", help="the client's cni_config_dir")
    a = ap.parse_args()
    if a.docker_host and not a.alloc_dir:
        sys.exit("contract server: --docker-host needs --alloc-dir")
    if bool(a.cni_path) != bool(a.cni_config_dir) or (a.cni_path and not a.docker_host):
        sys.exit("contract server: --cni-path and --cni-config-dir go together, with --docker-host")
    if a.bind not in ("127.0.0.1", "::1", "localhost"):
        sys.exit("contract server: loopback only")
    a.token = open(a.token_file).read().strip() if a.token_file else ""
    for k in ("namespaces", "cni_networks", "allow_runtimes", "allow_caps"):
        setattr(a, k, [x for x in getattr(a, k).split(",") if x])
    Handler.st = State(a)
    srv = ThreadingHTTPServer((a.bind, a.port), Handler)
    srv.daemon_threads = True
    if a.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.tls_cert, a.tls_key)
        if a.tls_client_ca:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(a.tls_client_ca)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
    with open(a.port_file + ".tmp", "w") as f:
        f.write(f"{srv.server_address[1]}\n")
    import os
    os.rename(a.port_file + ".tmp", a.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()

#!/bin/bash
# test: parallel, templates
# The docker template (issue 13): Docker in the sandbox, under gVisor,
# without the host's engine. dockerd is not running until the first docker
# command starts it; an image is built inside from a Dockerfile (FROM
# scratch with the template's static busybox: nothing is pulled from any
# registry, and every docker run says --pull=never) and a container runs
# from it, in its own PID namespace; `docker import` of a tar made inside
# works too; dockerd outlives the exec that started it. The capabilities
# dockerd needs (templates/docker/template.json "sandbox") are the docker
# template's only: a debian-12 sandbox keeps the default set.
#
# scripts/stack-up builds docker by default (SBX_TEMPLATES); a stack that
# was told to build other templates skips this test's docker part.
. "$(dirname "$0")/lib.sh"

t_require --root "runsc" runsc jq
rt_begin
rt_setup it-tmpl-docker

plan 13

req nginx GET /sandbox/templates
listed=$(j '.data.templates[] | select(.name == "docker") | .name')
case " ${SBX_TEMPLATES:-docker} " in
*" docker "* | " all ") want=docker ;;
*) want="" ;;
esac
if [ -z "$listed" ] && [ -z "$want" ]; then
	skip 13 "docker was not built by this stack (SBX_TEMPLATES=$SBX_TEMPLATES)"
	finish
	exit 0
fi
is "$listed" docker "docker is listed in GET /sandbox/templates"

# ---- capabilities: the docker template's own ------------------------------

# bits of CapBnd: CAP_NET_ADMIN 12, CAP_SYS_PTRACE 19, CAP_SYS_ADMIN 21
CAPS='python3 -c "v = int(open(\"/proc/self/status\").read().split(\"CapBnd:\")[1].split()[0], 16); print(v >> 12 & 1, v >> 19 & 1, v >> 21 & 1)"'
sb_create nginx '{"name":"it-docker-plain","template":"debian-12","specs":{"memory":256,"disk":1}}'
if [ "$STATUS" = 201 ]; then
	is "$(rt_sh "$SB_ID" "$CAPS" 30)" "0 0 0" "a debian-12 sandbox has no NET_ADMIN, SYS_PTRACE, SYS_ADMIN"
	is "$(rt_sh "$SB_ID" 'mkdir -p /mnt/t && mount -t tmpfs none /mnt/t 2>/dev/null && echo mounted || echo refused' 30)" refused \
		"...and cannot mount"
	sb_delete_quiet "$SB_ID" "$(rt_auth)"
else
	skip 2 "debian-12: no sandbox ($STATUS)"
fi

sb_create nginx '{"name":"it-docker","template":"docker","specs":{"memory":1024,"disk":2}}'
is "$STATUS $(j '.data.template')" "201 docker" "create a docker sandbox: 201, template docker"
if [ "$STATUS" != 201 ]; then
	skip 9 "no docker sandbox"
	finish
	exit 0
fi
D=$SB_ID
is "$(rt_sh "$D" "$CAPS" 30)" "1 1 1" "the docker sandbox has NET_ADMIN, SYS_PTRACE and SYS_ADMIN (gVisor's, from its template)"

# ---- docker --------------------------------------------------------------

STATE=$(conf_get state_dir)
v=$(jq -r '.version' "$STATE/templates/docker/current/image.json")
like "$(rt_sh "$D" 'dockerd --version; pgrep -x dockerd > /dev/null && echo running || echo "not running"' 30)" \
	"^Docker version ${v//./\\.}[+, ].*not running\$" "dockerd --version is the recorded $v, and dockerd is not running before the first docker command"

BUILD=$(cat <<'SH'
set -e
mkdir -p /root/app && cd /root/app
cp /bin/busybox .
cat > Dockerfile <<'EOF'
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "sh", "-c", "/bin/busybox mkdir -p /out && echo built-inside-sbx > /out/msg"]
CMD ["/bin/busybox", "cat", "/out/msg"]
EOF
docker build -q -t sbx-hello . > /tmp/build.out 2>&1 || { cat /tmp/build.out; tail -n 20 /var/log/dockerd.log; exit 1; }
docker images --format '{{.Repository}}:{{.Tag}}' sbx-hello
SH
)
out=$(rt_sh "$D" "$BUILD 2>&1" 180)
is "$out" "sbx-hello:latest" "docker build makes an image inside the sandbox (FROM scratch, a RUN step)"
[ "$out" = "sbx-hello:latest" ] || diag "$out"
is "$(rt_sh "$D" 'docker run --pull=never --rm sbx-hello 2>&1' 120)" built-inside-sbx \
	"docker run of it prints what its RUN step wrote"
PIDNS=$(cat <<'SH'
docker run --pull=never --rm --network=none sbx-hello /bin/busybox sh -c 'echo pid $$; /bin/busybox cat /proc/[0-9]*/cmdline | /bin/busybox grep -c "sbx-ini[t]"' 2>&1
SH
)
is "$(echo $(rt_sh "$D" "$PIDNS" 120))" "pid 1 0" \
	"a container (--network=none) has its own PID namespace: it is PID 1 and sees no sbx-init"
is "$(rt_sh "$D" 'docker run --pull=never --rm --network=host sbx-hello 2>&1' 120)" built-inside-sbx \
	"--network=host works too"

IMPORT='set -e; mkdir -p /tmp/imp/bin; cp /bin/busybox /tmp/imp/bin/
tar -C /tmp/imp -cf - . | docker import - sbx-imported > /dev/null
docker run --pull=never --rm sbx-imported /bin/busybox echo imported-ok'
is "$(rt_sh "$D" "$IMPORT 2>&1" 120)" imported-ok "docker import of a tar made inside, and a container from it"

# dockerd was started by the first exec and outlived it
is "$(echo $(rt_sh "$D" 'pgrep -x dockerd | wc -l' 30))" 1 "one dockerd, still running after the exec that started it"
is "$(echo $(rt_sh "$D" 'docker ps -a -q | wc -l; docker images -q sbx-hello | wc -l' 60))" "0 1" \
	"a later exec uses the same dockerd: the image is there, --rm containers are gone"

sb_delete_quiet "$D" "$(rt_auth)"
finish

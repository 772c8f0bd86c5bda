#!/bin/bash
# test: parallel
# sbx-init's FILE streams (protocol 2), sbx-init run as a normal process and
# driven by t/init/initctl: a 50 MB random file byte-exact both ways with
# sbx-init's peak memory bounded, atomic writes (temp + rename; nothing left
# behind, not even when the writer goes away), a missing parent, mkdir -p,
# modes, a symlink at the target replaced and not written through, listing
# with type/size/mode, delete (file, empty dir, tree, symlinks in the tree
# removed not followed, the root refused), and malformed FILE frames.
set -u
. "$(dirname "$0")/lib.sh"

sbxinit_bins

plan 43

T=$T_TMP
D=$T/root
mkdir -p "$D"
sbxinit_start

c() { "$CTL" "$SOCK" "$@"; }
leftovers() { find "$D" -name '.sbx-upload-*' | wc -l; }

# ---- write and read --------------------------------------------------------
T_SECTION=big
head -c 50000000 /dev/urandom > "$T/r50"
c put "$D/r50" < "$T/r50"
is $? 0 "a 50 MB write ends with EXIT 0"
cmp -s "$T/r50" "$D/r50"
ok $? "... and the file inside is byte-exact"
c get "$D/r50" --credit 65536 --credit-delay-ms 1 --stat > "$T/r50.back" 2> "$T/stat"
is $? 0 "a 50 MB read through a 64 KiB credit window and a slow reader ends with EXIT 0"
cmp -s "$T/r50" "$T/r50.back"
ok $? "... and comes back byte-exact"
like "$(cat "$T/stat")" '^size=50000000 mode=0644 mtime=[0-9]+$' "STAT precedes the data with size, mode and mtime"
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$INITPID/status")
if grep -q __asan_init "$INIT"; then
	skip 1 "sbx-init built with ASan (its shadow memory is not the program's)"
else
	ok "[ $hwm -lt 16384 ]" "sbx-init's peak RSS over both transfers stayed under 16 MiB (VmHWM ${hwm} KiB)"
fi
is "$(leftovers)" 0 "no temp file is left behind"
rm -f "$D/r50" "$T/r50.back"

T_SECTION=write
printf 'x' | c put "$D/no/such/dir/f" 2> "$T/err"
is "$?|$(cat "$T/err")" "4|initctl: errno=2 (No such file or directory)" "a missing parent is ENOENT"
ok '[ ! -e "$D/no" ]' "... and nothing was created"
printf 'deep' | c put "$D/a/b/c/f" --mkdir
is "$?|$(cat "$D/a/b/c/f" 2> /dev/null)" "0|deep" "with bit0 the parents are made"
printf '' | c put "$D/empty"
is "$?|$(stat -c %s "$D/empty" 2> /dev/null)" "0|0" "an empty file can be written"
printf 'secret' | c put "$D/m" --mode 0600
is "$(stat -c %a "$D/m")" 600 "the mode is applied (umask or not)"
printf 'old' > "$D/over"
printf 'new' | c put "$D/over"
is "$(cat "$D/over")" new "an existing file is replaced"
printf 'outside' > "$T/target"
ln -s "$T/target" "$D/link"
printf 'through?' | c put "$D/link"
is "$(cat "$T/target")" outside "a symlink at the target is not written through"
ok '[ -f "$D/link" ] && [ ! -L "$D/link" ] && [ "$(cat "$D/link")" = "through?" ]' "... it is replaced by the new file"
mkdir "$D/adir"
printf 'x' | c put "$D/adir" 2> "$T/err"
like "$(cat "$T/err")" 'errno=21 ' "writing onto a directory is EISDIR"
printf 'x' > "$D/afile"
printf 'x' | c put "$D/afile/sub" 2> "$T/err"
like "$(cat "$T/err")" 'errno=20 ' "a file as parent is ENOTDIR"

# the writer goes away in the middle: no temp file, no target
python3 - "$SOCK" "$D/dropped" "$(dirname "$0")" << 'PY'
import struct, sys, time; sys.path.insert(0, sys.argv[3])
from chanlib import connect
s = connect(sys.argv[1])
def fr(t, st, p): return struct.pack(">IBI", len(p) + 5, t, st) + p
s.sendall(fr(6, 1, struct.pack(">IIII", 1, 0, 0, 0) + sys.argv[2].encode() + b"\0"))
s.sendall(fr(3, 1, b"partial" * 1000))
s.recv(100)  # the STDIN_ACK: the temp file exists now
s.close()
PY
wait_until 5 sh -c "[ \$(find '$D' -name '.sbx-upload-*' | wc -l) = 0 ]"
ok $? "a write whose channel drops leaves no temp file"
ok '[ ! -e "$D/dropped" ]' "... and no target"

# the host gives up on a write (SIGNAL on its stream): EXIT ECANCELED, no
# temp file, no target, and the connection serves on
python3 - "$SOCK" "$D/cancelled" "$(dirname "$0")" > "$T/cancel" 2>&1 << 'PY'
import struct, sys; sys.path.insert(0, sys.argv[3])
from chanlib import connect, frame, read_frame
s = connect(sys.argv[1])
s.settimeout(5)
s.sendall(frame(6, 1, struct.pack(">IIII", 1, 0, 0, 0) + sys.argv[2].encode() + b"\0"))
s.sendall(frame(3, 1, b"partial" * 1000))
print("ack", read_frame(s)[0] == 0x88)
s.sendall(frame(4, 1, struct.pack(">I", 9)))
t, st, p = read_frame(s)
print("exit", t, st, p.hex())
s.sendall(frame(1, 0, b"hi"))
print("pong", read_frame(s))
PY
is "$(sed -n 2p "$T/cancel")" "exit 133 1 0000007d0000000002" "a SIGNAL on a write stream ends it: EXIT errno ECANCELED ($(tr '\n' ' ' < "$T/cancel"))"
ok '[ "$(leftovers)" = 0 ] && [ ! -e "$D/cancelled" ]' "... it leaves no temp file and no target"
like "$(sed -n 3p "$T/cancel")" "^pong \\(129, 0, b'hi'\\)" "... and the connection serves on (PING answered)"

T_SECTION=read
c get "$D/nope" 2> "$T/err"
like "$?|$(cat "$T/err")" '^4\|initctl: errno=2 ' "reading a missing file is ENOENT"
c get "$D/adir" 2> "$T/err"
like "$(cat "$T/err")" 'errno=21 ' "reading a directory is EISDIR"
mkfifo "$D/fifo"
timeout 5 "$CTL" "$SOCK" get "$D/fifo" 2> "$T/err"
like "$(cat "$T/err")" 'errno=22 ' "reading a FIFO is EINVAL at once (open does not block sbx-init)"
printf 'a\000b\377' > "$D/bin"
c get "$D/bin" > "$T/bin.got"
cmp -s "$D/bin" "$T/bin.got"
ok $? "binary content (NUL, 0xff) reads back exactly"

# ---- list ------------------------------------------------------------------
T_SECTION=list
L=$D/l
mkdir -p "$L/sub"
printf '12345' > "$L/five"
chmod 640 "$L/five"
ln -s /etc "$L/sym"
touch "$L/$(printf 'new\nline')"
touch "$L/tab	name"
out=$(c ls "$L" | sed -E 's/^([^\t]*)\t([^\t]*)\t([^\t]*)\t[^\t]*\t/\1|\2|\3|/' | LC_ALL=C sort | tr '\n' ';')
is "$out" "dir|4096|0755|sub;file|0|0644|tab	name;file|5|0640|five;symlink|4|0777|sym;" \
	"entries come as type, size, mode, (mtime,) name; a tab in a name is kept"
unlike "$(c ls "$L")" 'new' "a name with a newline is left out (it cannot be a line)"
like "$(c ls "$L" | awk -F'\t' '$5 == "five" {print $4}')" '^[0-9]{9,}$' "mtime is unix seconds"
c ls "$L/five" 2> "$T/err"
like "$(cat "$T/err")" 'errno=20 ' "listing a file is ENOTDIR"
c ls "$L/none" 2> "$T/err"
like "$(cat "$T/err")" 'errno=2 ' "listing a missing path is ENOENT"

# ---- mkdir and delete ------------------------------------------------------
T_SECTION=mkdir
c mkdir "$D/nd"
rc=$?
ok '[ $rc = 0 ] && [ -d "$D/nd" ]' "mkdir makes a directory"
c mkdir "$D/nd" 2> "$T/err"
like "$(cat "$T/err")" 'errno=17 ' "... an existing one is EEXIST"
c mkdir "$D/p/q/r" -p --mode 0700
rc=$?
ok '[ $rc = 0 ] && [ "$(stat -c %a "$D/p/q/r")" = 700 ]' "mkdir -p makes parents, the last with the mode"
c mkdir "$D/p/q/r" -p
is $? 0 "... and an existing directory is fine with -p"
c mkdir "$D/x/y" 2> "$T/err"
like "$(cat "$T/err")" 'errno=2 ' "without -p a missing parent is ENOENT"

T_SECTION=delete
c rm "$D/over"
rc=$?
ok '[ $rc = 0 ] && [ ! -e "$D/over" ]' "rm removes a file"
c rm "$D/p" 2> "$T/err"
ok '[ -d "$D/p/q/r" ] && grep -q "errno=39 " "$T/err"' "a non-empty directory is ENOTEMPTY without recursion"
mkdir -p "$T/keep"
touch "$T/keep/precious"
ln -s "$T/keep" "$D/p/q/to-keep"
c rm "$D/p" -r
rc=$?
ok '[ $rc = 0 ] && [ ! -e "$D/p" ]' "rm -r removes a tree"
ok '[ -e "$T/keep/precious" ]' "... a symlink inside it is removed, not followed"
c rm / -r 2> "$T/err"
like "$(cat "$T/err")" 'errno=16 ' "the root cannot be deleted (EBUSY)"

# ---- malformed ---------------------------------------------------------------
T_SECTION=malformed
python3 - "$SOCK" "$(dirname "$0")" << 'PY'
import struct, sys; sys.path.insert(0, sys.argv[2])
from chanlib import connect
bad = [b"/a\0b\0", b"rel\0", b"/a"]
res = 0
for path in bad:
    s = connect(sys.argv[1])
    p = struct.pack(">IIII", 2, 0, 0, 0) + path
    s.sendall(struct.pack(">IBI", len(p) + 5, 6, 1) + p)
    if s.recv(100) != b"":
        res = 1
sys.exit(res)
PY
ok $? "a FILE with a NUL inside its path, a relative path or no NUL closes the connection"
out=$(c ping)
is "$out" pong "sbx-init still serves new connections"

finish

/* The channel between the node agent (host) and sbx-init (PID 1 inside each
 * sandbox): length-prefixed binary frames over a unix stream socket.
 *
 *   u32 len (big-endian; bytes that follow: type + stream + payload)
 *   u8  type
 *   u32 stream (big-endian; the exec/process the frame belongs to, 0 = channel)
 *   payload (len - 5 bytes, at most SBX_FRAME_MAX_PAYLOAD)
 *
 * Everything that comes from inside the sandbox is hostile: the host decodes
 * with sbx_frame_decode*(), which check every length and value and never
 * guess. A malformed frame closes the channel. */
#ifndef SBX_FRAME_H
#define SBX_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include "err.h"

#define SBX_FRAME_HDR 9
#define SBX_FRAME_MAX_PAYLOAD (256 * 1024)

enum sbx_frame_type {
	/* host -> sbx-init */
	SBX_F_PING = 0x01,   /* payload: opaque cookie (<= 64 bytes), echoed in PONG */
	SBX_F_EXEC = 0x02,   /* payload: struct below; starts process `stream` */
	SBX_F_STDIN = 0x03,  /* payload: bytes; empty payload closes stdin */
	SBX_F_SIGNAL = 0x04, /* payload: u32 signal number, sent to the process group */
	SBX_F_CREDIT = 0x05, /* payload: u32 more output bytes the host will take */
	SBX_F_FILE = 0x06,   /* (v2) payload: FILE below; a file operation on a new stream */
	SBX_F_ATTACH = 0x07, /* (v2) payload: ATTACH below; replay/follow a background process */
	SBX_F_PROCS = 0x08,  /* (v2) empty payload; lists background processes */
	SBX_F_PSTDIN = 0x09, /* (v2) payload: u32 pid + bytes (none: close); background stdin */
	SBX_F_PSIGNAL = 0x0a, /* (v2) payload: u32 pid, u32 signal; background process group */
	SBX_F_AUTH = 0x0b,   /* (v3) payload: AUTH below; the host's answer to HELLO */
	SBX_F_STATUS = 0x0c, /* empty payload, stream 0: how many processes run besides sbx-init
			      * (the node agent asks before it freezes an idle sandbox) */
	SBX_F_PRESIZE = 0x0d, /* (v3) payload: u32 pid, u16 cols, u16 rows; a background pty's size */
	/* sbx-init -> host */
	SBX_F_PONG = 0x81,    /* payload: the cookie */
	SBX_F_STARTED = 0x82, /* payload: u32 pid inside the sandbox */
	SBX_F_STDOUT = 0x83,  /* payload: bytes (1..max) */
	SBX_F_STDERR = 0x84,  /* payload: bytes (1..max) */
	SBX_F_EXIT = 0x85,    /* payload: i32 exit code, u32 signal, u8 flags (SBX_EXIT_*) */
	SBX_F_ERROR = 0x86,   /* payload: UTF-8 message (<= 1024 bytes), the exec failed to start */
	SBX_F_HELLO = 0x87,   /* payload: HELLO below, sent first on connect */
	SBX_F_STDIN_ACK = 0x88, /* payload: u32 stdin bytes written to the process */
	SBX_F_STAT = 0x89,    /* (v2) payload: u64 size, u32 mode, i64 mtime; before a read's data */
	SBX_F_AUTH_OK = 0x8a, /* (v3) payload: 32-byte MAC; sbx-init proved which sandbox it is */
	SBX_F_STATUS_R = 0x8b, /* payload: u32 processes in the sandbox besides sbx-init (zombies not
				* counted), the answer to STATUS, on stream 0 */
};

/* The handshake (v3). Each sandbox has its own random channel key, known
 * only to the node agent (in the sandbox's host directory) and to that
 * sandbox's sbx-init; each end proves it holds the key for that sandbox id
 * before anything else is said, so a connection that reached the wrong
 * sandbox (or something else listening) fails instead of running commands:
 *   sbx-init -> HELLO   u32 version, nonce_i[16]
 *   host     -> AUTH    nonce_n[16], mac("node", nonce_i)
 *   sbx-init -> AUTH_OK mac("init", nonce_n)
 * mac(role, nonce) = BLAKE2b-256 keyed with the channel key over
 * "sbx-chan3 " role, nonce, sandbox id (chanauth.h). sbx-init answers any
 * other frame before a valid AUTH by closing the connection. */
#define SBX_CHAN_NONCE_LEN 16
#define SBX_CHAN_MAC_LEN 32
#define SBX_HELLO_LEN (4 + SBX_CHAN_NONCE_LEN)
#define SBX_AUTH_LEN (SBX_CHAN_NONCE_LEN + SBX_CHAN_MAC_LEN)

/* EXIT flags. code/signal are the process's unless ERRNO is set. */
#define SBX_EXIT_TIMED_OUT 0x1u /* killed by the EXEC timeout (code 124, signal 9) */
#define SBX_EXIT_ERRNO 0x2u     /* the operation failed: code is an errno (1..255), signal 0 */
#define SBX_EXIT_DETACHED 0x4u  /* the process runs on: code and signal are 0 (background
				 * EXEC started; ATTACH without follow reached the end) */
#define SBX_EXIT_TRUNCATED 0x8u /* ATTACH: the process's output log hit its cap */
#define SBX_EXIT_FLAGS 0xfu

/* Stdin flow control: the host keeps at most this many stdin bytes of one
 * process unacknowledged (STDIN_ACK); sbx-init closes a channel that sends
 * more, so a process that does not read its stdin costs bounded memory. */
#define SBX_STDIN_WINDOW (1024 * 1024)

#define SBX_FRAME_VERSION 3

/* EXEC payload:
 *   u32 flags (bit0: stdin is kept open for STDIN frames; bit1: background)
 *   u32 timeout_ms (0 = none)
 *   u32 initial output credit in bytes
 *   u16 argc, u16 envc
 *   [u16 cols, u16 rows: only with SBX_EXEC_PTY]
 *   cwd\0 argv[0]\0 ... argv[argc-1]\0 env[0]\0 ... ("NAME=value")
 * With SBX_EXEC_PTY the command runs on a pseudo-terminal of that size (its
 * session's controlling terminal): its output, stdout and stderr alike, comes
 * as STDOUT, and stdin (STDIN / PSTDIN) is what is typed on the terminal.
 * argc >= 1; the whole payload <= SBX_FRAME_MAX_PAYLOAD. */
#define SBX_EXEC_STDIN 0x1u
#define SBX_EXEC_BACKGROUND 0x2u
#define SBX_EXEC_PTY 0x4u
#define SBX_PTY_MAX 1000 /* cols and rows: 1..SBX_PTY_MAX */
#define SBX_EXEC_MAX_ARGS 4096

struct sbx_frame {
	uint8_t type;
	uint32_t stream;
	const uint8_t *payload; /* points into the caller's buffer */
	uint32_t len;
};

struct sbx_exec_req {
	uint32_t flags, timeout_ms, credit;
	const char *cwd;
	int argc, envc;
	const char **argv; /* NULL-terminated, pointers into the payload */
	const char **envp; /* NULL-terminated */
	uint16_t cols, rows; /* with SBX_EXEC_PTY */
};

struct sbx_exit_info {
	int32_t code;
	uint32_t signal;
	int timed_out;
	uint8_t flags; /* all SBX_EXIT_* bits */
	int err;       /* the errno when flags has SBX_EXIT_ERRNO, else 0 */
};

/* FILE payload (v2):
 *   u32 op (SBX_FILE_*), u32 flags, u32 mode (permission bits; 0 = default),
 *   u32 credit (read/list: initial output credit), path\0
 * path is absolute, 1..SBX_PATH_MAX bytes, ends at the payload's only NUL. */
enum sbx_file_op {
	SBX_FILE_WRITE = 1,  /* data follows as STDIN frames (STDIN_ACK window), empty STDIN ends */
	SBX_FILE_READ = 2,   /* STAT, then the bytes as STDOUT frames (CREDIT) */
	SBX_FILE_LIST = 3,   /* one STDOUT frame per entry (sbx_list_entry), CREDIT */
	SBX_FILE_DELETE = 4, /* file, symlink or empty dir; a whole tree with SBX_FILE_PARENTS */
	SBX_FILE_MKDIR = 5,
};
#define SBX_FILE_PARENTS 0x1u /* write/mkdir: create missing parents; delete: recursive */
#define SBX_PATH_MAX 4095
#define SBX_FILE_FIXED 16
#define SBX_FILE_MAX (SBX_FILE_FIXED + SBX_PATH_MAX + 1)

struct sbx_file_req {
	uint32_t op, flags, mode, credit;
	const char *path; /* points into the payload */
};

/* ATTACH payload (v2): u32 pid, u64 offset, u32 flags (bit0 follow), u32 credit.
 * offset counts output bytes (stdout and stderr together, as produced). */
#define SBX_ATTACH_FOLLOW 0x1u
#define SBX_ATTACH_LEN 20
struct sbx_attach_req {
	uint32_t pid, flags, credit;
	uint64_t offset;
};

/* STAT payload (v2), sent before the data of a FILE read. */
#define SBX_STAT_LEN 20
struct sbx_file_stat {
	uint64_t size;  /* <= INT64_MAX */
	uint32_t mode;  /* permission bits only (<= 07777) */
	int64_t mtime;  /* unix seconds */
};

/* A FILE list entry (one STDOUT payload):
 *   type \t size \t mode \t mtime \t name
 * type: file|dir|symlink|other; size: decimal; mode: 4 octal digits;
 * mtime: decimal unix seconds (may be negative); name: 1..255 bytes, no NUL,
 * '/' or '\n', not . or .. (entries whose name has '\n' are not listed). */
enum sbx_ftype { SBX_FT_FILE = 1, SBX_FT_DIR, SBX_FT_SYMLINK, SBX_FT_OTHER };
#define SBX_NAME_MAX 255
#define SBX_LIST_LINE_MAX 320
struct sbx_list_entry {
	enum sbx_ftype type;
	uint64_t size;
	uint32_t mode;
	int64_t mtime;
	const char *name; /* not NUL-terminated: name_len bytes (into the payload) */
	size_t name_len;
};

/* A PROCS entry (one STDOUT payload):
 *   pid \t state \t exit_code \t signal \t flags \t started \t ended \t bytes \t cmd
 * state: running|exited; exit_code, signal: 0 while running; flags: decimal
 * SBX_EXIT_TIMED_OUT|SBX_EXIT_TRUNCATED; started, ended: unix ms (ended 0
 * while running); bytes: output bytes produced so far (the end offset for
 * ATTACH, truncated or not); cmd: argv joined by spaces, strict UTF-8 without
 * control characters, <= SBX_CMD_MAX bytes (may be empty). */
#define SBX_CMD_MAX 1024
#define SBX_PROC_LINE_MAX (SBX_CMD_MAX + 160)
struct sbx_proc_info {
	uint32_t pid;
	int running;
	int32_t exit_code;
	uint32_t signal;
	uint8_t flags;
	int64_t started_ms, ended_ms;
	uint64_t bytes;
	const char *cmd; /* not NUL-terminated: cmd_len bytes */
	size_t cmd_len;
};

/* Big-endian integers as the frames carry them. */
static inline void sbx_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline uint32_t sbx_get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Encodes a frame header into out[SBX_FRAME_HDR]. */
void sbx_frame_header(uint8_t out[SBX_FRAME_HDR], uint8_t type, uint32_t stream, uint32_t payload_len);

/* Looks at buf[0..n): returns the size of the first complete frame (and fills
 * f), 0 when more bytes are needed, -1 (err) when the bytes cannot be a valid
 * frame: unknown type, oversized, or a type not allowed from `from_inside`. */
long sbx_frame_parse(const uint8_t *buf, size_t n, int from_inside, struct sbx_frame *f, sbx_err *err);

/* Builds an EXEC payload into a malloc'd buffer. */
int sbx_exec_encode(const struct sbx_exec_req *req, uint8_t **out, size_t *len, sbx_err *err);
/* Decodes an EXEC payload; argv/envp are malloc'd arrays pointing into payload
 * (free both with sbx_exec_req_free). */
int sbx_exec_decode(const uint8_t *p, size_t n, struct sbx_exec_req *req, sbx_err *err);
void sbx_exec_req_free(struct sbx_exec_req *req);

/* Strict decoders for frames from inside. */
int sbx_frame_decode_exit(const struct sbx_frame *f, struct sbx_exit_info *out, sbx_err *err);
int sbx_frame_decode_u32(const struct sbx_frame *f, uint32_t *out, sbx_err *err);

/* v2. Encoders write into out (at least the stated size) and return the
 * payload length, or -1 (err) for a request that is not valid. */
long sbx_exit_encode(uint8_t out[9], int32_t code, uint32_t signal, uint8_t flags);
long sbx_file_encode(const struct sbx_file_req *req, uint8_t out[SBX_FILE_MAX], sbx_err *err);
int sbx_file_decode(const uint8_t *p, size_t n, struct sbx_file_req *req, sbx_err *err);
long sbx_attach_encode(const struct sbx_attach_req *req, uint8_t out[SBX_ATTACH_LEN]);
int sbx_attach_decode(const uint8_t *p, size_t n, struct sbx_attach_req *req, sbx_err *err);
/* PSIGNAL: u32 pid, u32 signal (1..64). PSTDIN: u32 pid then the bytes. */
long sbx_psignal_encode(uint32_t pid, uint32_t sig, uint8_t out[8]);
/* PRESIZE: a background process's terminal gets cols x rows (1..SBX_PTY_MAX). */
long sbx_presize_encode(uint32_t pid, uint16_t cols, uint16_t rows, uint8_t out[8]);
int sbx_presize_decode(const uint8_t *p, size_t n, uint32_t *pid, uint16_t *cols, uint16_t *rows, sbx_err *err);
int sbx_psignal_decode(const uint8_t *p, size_t n, uint32_t *pid, uint32_t *sig, sbx_err *err);
int sbx_pstdin_decode(const uint8_t *p, size_t n, uint32_t *pid, const uint8_t **data, size_t *len,
		      sbx_err *err);
long sbx_stat_encode(const struct sbx_file_stat *st, uint8_t out[SBX_STAT_LEN]);
int sbx_frame_decode_stat(const struct sbx_frame *f, struct sbx_file_stat *out, sbx_err *err);
/* List and PROCS lines: encode into out[cap] (cap >= the *_LINE_MAX), -1
 * when the entry cannot be represented (e.g. a name with '\n'). Decoders are
 * for lines from inside: strict, canonical (decode then encode gives back
 * the same bytes). */
long sbx_list_entry_encode(const struct sbx_list_entry *e, char *out, size_t cap);
int sbx_list_entry_decode(const uint8_t *p, size_t n, struct sbx_list_entry *e, sbx_err *err);
const char *sbx_ftype_name(enum sbx_ftype t);
long sbx_proc_info_encode(const struct sbx_proc_info *pi, char *out, size_t cap);
int sbx_proc_info_decode(const uint8_t *p, size_t n, struct sbx_proc_info *pi, sbx_err *err);
/* v3 handshake payloads. */
long sbx_hello_encode(const uint8_t nonce[SBX_CHAN_NONCE_LEN], uint8_t out[SBX_HELLO_LEN]);
int sbx_hello_decode(const struct sbx_frame *f, uint32_t *version, uint8_t nonce[SBX_CHAN_NONCE_LEN],
		     sbx_err *err);
long sbx_auth_encode(const uint8_t nonce[SBX_CHAN_NONCE_LEN], const uint8_t mac[SBX_CHAN_MAC_LEN],
		     uint8_t out[SBX_AUTH_LEN]);
int sbx_auth_decode(const struct sbx_frame *f, uint8_t nonce[SBX_CHAN_NONCE_LEN],
		    uint8_t mac[SBX_CHAN_MAC_LEN], sbx_err *err);
/* Strict UTF-8 (no overlongs, surrogates, NUL). */
int sbx_utf8_valid(const uint8_t *s, size_t n);

#endif

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
	/* sbx-init -> host */
	SBX_F_PONG = 0x81,    /* payload: the cookie */
	SBX_F_STARTED = 0x82, /* payload: u32 pid inside the sandbox */
	SBX_F_STDOUT = 0x83,  /* payload: bytes (1..max) */
	SBX_F_STDERR = 0x84,  /* payload: bytes (1..max) */
	SBX_F_EXIT = 0x85,    /* payload: i32 exit code, u32 signal, u8 flags (bit0 timed out) */
	SBX_F_ERROR = 0x86,   /* payload: UTF-8 message (<= 1024 bytes), the exec failed to start */
	SBX_F_HELLO = 0x87,   /* payload: u32 protocol version, sent first on connect */
	SBX_F_STDIN_ACK = 0x88, /* payload: u32 stdin bytes written to the process */
};

/* Stdin flow control: the host keeps at most this many stdin bytes of one
 * process unacknowledged (STDIN_ACK); sbx-init closes a channel that sends
 * more, so a process that does not read its stdin costs bounded memory. */
#define SBX_STDIN_WINDOW (1024 * 1024)

#define SBX_FRAME_VERSION 1

/* EXEC payload:
 *   u32 flags (bit0: stdin is kept open for STDIN frames; bit1: background)
 *   u32 timeout_ms (0 = none)
 *   u32 initial output credit in bytes
 *   u16 argc, u16 envc
 *   cwd\0 argv[0]\0 ... argv[argc-1]\0 env[0]\0 ... ("NAME=value")
 * argc >= 1; the whole payload <= SBX_FRAME_MAX_PAYLOAD. */
#define SBX_EXEC_STDIN 0x1u
#define SBX_EXEC_BACKGROUND 0x2u
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
};

struct sbx_exit_info {
	int32_t code;
	uint32_t signal;
	int timed_out;
};

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

#endif

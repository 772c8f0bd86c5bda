/* sbx-init's private header: what its files share. main.c describes the
 * program; each file holds one part of it:
 *   main.c    arguments, start-up, the listening socket, signals and reaping,
 *             the epoll loop
 *   conn.c    connections: accept, read, the frames from the host, what is
 *             sent back; byte buffers
 *   proc.c    EXEC: starting commands, pipes, output within credit, stdin,
 *             timeouts, exit; background processes' output logs
 *   spare.c   the spare shell an EXEC of `/bin/sh -c` may start in
 *   xfer.c    streams that are not processes: their life, end and answer
 *   attach.c  background processes by pid: ATTACH, PROCS, PSTDIN, PSIGNAL, PRESIZE
 *   file.c    FILE operations: write, read, list, delete, mkdir
 * Only libc (plus src/lib's frame.c and err.c, compiled in): the binary is
 * static and bind-mounted into every sandbox, whatever its image. */
#ifndef SBX_INIT_H
#define SBX_INIT_H

#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <sys/types.h>
#include "chanauth.h"
#include "frame.h"

/* One read of a command's output, one frame: as large as a frame may be,
 * so a fast writer costs the sentry a quarter of the reads and writes of
 * 64 KiB ones (the pipes are made as large, OUT_PIPE_SZ) */
#define READ_CHUNK SBX_FRAME_MAX_PAYLOAD
/* A command's stdout and stderr pipes (F_SETPIPE_SZ; the default 64 KiB
 * put the writer to sleep, and woke sbx-init, every 64 KiB). Credit, not
 * the pipe, still bounds what goes out. */
#define OUT_PIPE_SZ (1024 * 1024)
/* A connection whose unsent output passes this stops its processes' reads
 * until the host reads: the socket is the last link of flow control. */
#define OUT_HIGH (1024 * 1024)
/* A background process's output log is a run of records: u8 kind (1 stdout,
 * 2 stderr), u32 length (big-endian, > 0), the bytes. */
#define LOG_REC_HDR 5

enum wkind { W_LISTEN, W_SIGNAL, W_CONN, W_OUT, W_ERR, W_IN, W_CHANDIR };

struct watch {
	enum wkind kind;
	void *obj;
};

struct buf {
	uint8_t *p;
	size_t off, len, cap; /* data is p[off..len) */
};

struct conn {
	struct watch w;
	int fd;
	int dead; /* dropped at the end of the loop iteration */
	int want_out;
	int congested;
	int authed;      /* the host proved it holds this sandbox's key (AUTH) */
	uint8_t nonce[SBX_CHAN_NONCE_LEN]; /* sent in HELLO, signed in AUTH */
	uint8_t *in;
	size_t inlen;
	struct buf out;
	struct conn *next;
};

struct proc {
	struct proc *next;
	struct conn *conn; /* NULL: detached, output is read and discarded */
	uint32_t stream;
	pid_t pid;
	int background, done;
	int pty;     /* on a pseudo-terminal: fd_out is its master, fd_err -1 */
	int fd_out, fd_err, fd_in;
	struct watch w_out, w_err, w_in;
	int armed_out, armed_err, armed_in;
	uint64_t credit;
	struct buf stdin_buf;
	int stdin_close; /* close stdin once stdin_buf is written */
	int exited, status, timed_out;
	int64_t deadline_us; /* its timeout (mono_us; 0: none), proc_timers */
	size_t drained;
	int64_t last_read_us, hold_until; /* output coalescing (proc.c, HOLD_US) */
	/* background only */
	int code, sig;            /* once done */
	char *cmd;                /* for PROCS */
	int64_t started_ms, ended_ms;
	int log_fd;               /* -1 once the log cannot be written */
	uint64_t log_size;        /* bytes of complete records in the log */
	uint64_t logged, out_bytes; /* output bytes kept / produced */
	int truncated;
	int refs;                 /* xfers pointing here: not evicted while > 0 */
	uint64_t stdin_written;   /* bytes that reached the pipe (PSTDIN answers) */
};

/* A stream that is not a process: a file operation, an attachment to a
 * background process, or a PSTDIN waiting for its bytes to be written. */
enum xkind { X_WRITE, X_READ, X_LIST, X_ATTACH, X_PSTDIN };

struct xfer {
	struct xfer *next;
	struct conn *conn;
	uint32_t stream;
	enum xkind kind;
	int done;
	uint64_t credit;
	int fd;           /* write: the temp file; read: the file */
	DIR *dir;         /* list */
	char *path, *tmp; /* write: target and temp file (tmp NULL once renamed) */
	uint32_t mode;
	struct proc *proc; /* attach, pstdin (holds a ref) */
	int follow;
	uint64_t fpos, rec_left, skip; /* attach: log position, record left, bytes to skip */
	uint8_t rec_kind;
	uint64_t upto; /* pstdin: answered once stdin_written reaches it */
	int close_after;
};

/* main.c: settings from the command line, logging, the epoll set */
extern const char *procs_dir;
extern uint64_t proc_log_max;
extern long cmd_nproc; /* RLIMIT_NPROC of every command (0: ours) */
void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ep_add(int fd, struct watch *w, uint32_t events);
void ep_mod(int fd, struct watch *w, uint32_t events);
void set_armed(int fd, struct watch *w, int *armed, int want, uint32_t events);
void close_watched(int *fd, int *armed);

/* sbx-init's own places inside the sandbox (workers/oci.h puts them there);
 * the files API may read them but never change them (file.c). */
#define RESERVED_CHAN_DIR "/run/sbx"
#define RESERVED_INIT_DIR "/.sbx"

/* conn.c */
extern struct conn *conns;
/* This sandbox's channel key and the id the handshake names (from the
 * environment at start: chanauth.h). */
extern uint8_t chan_key[SBX_CHAN_KEY_LEN];
extern char chan_id[SBX_CHAN_ID_MAX + 1];
size_t buf_pending(const struct buf *b);
/* Free bytes at p + len without growing (compacts an emptied buffer). */
size_t buf_room(struct buf *b);
int buf_reserve(struct buf *b, size_t n);
void buf_free(struct buf *b);
void conn_kill(struct conn *c, const char *why);
void conn_flush(struct conn *c);
/* The loop's wait (ms, -1: none) shortened to SHRINK_IDLE_MS while a
 * connection keeps a big empty output buffer; conns_shrink, after such a
 * wait passed quiet, returns them. */
int conns_shrink_wait(int wait_ms);
void conns_shrink(void);
void conn_send(struct conn *c, uint8_t type, uint32_t stream, const void *payload, size_t len);
void conn_send_u32(struct conn *c, uint8_t type, uint32_t stream, uint32_t v);
void send_error(struct conn *c, uint32_t stream, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void send_exit(struct conn *c, uint32_t stream, int code, int sig, uint8_t flags);
void note_congestion(struct conn *c);
void procs_of_conn_service(struct conn *c);
void conn_read(struct conn *c);
void conn_accept(int lfd);

/* proc.c */
extern struct proc *procs;
void proc_arm(struct proc *p);
ssize_t proc_read(struct proc *p, int is_err);
void proc_stdin_flush(struct proc *p);
void proc_service(struct proc *p);
void proc_start(struct conn *c, uint32_t stream, const struct sbx_exec_req *req);
struct child_err {
	int stage; /* 1 chdir, 2 exec */
	int err;
};
int proc_pipes(int pin[2], int pout[2], int perr[2]);
void proc_pipes_close(int pin[2], int pout[2], int perr[2]);
pid_t proc_spawn(const struct sbx_exec_req *req, char **env, int in, int out, int err, int tty,
		 struct child_err *ce);
int proc_timers(void);
/* A pty process's terminal size: 0 or an errno (ENOTTY: no terminal). */
int proc_resize(struct proc *p, uint16_t cols, uint16_t rows);
void on_presize(struct conn *c, uint32_t stream, uint32_t pid, uint16_t cols, uint16_t rows);
void log_unlink(const struct proc *p);
void proc_free(struct proc *p);

/* spare.c */
extern int spare_on; /* --spare-shell */
pid_t spare_pid(void);
void spare_reaped(pid_t pid);
int spare_take(const struct sbx_exec_req *req, char **env, pid_t *pid, int out[2], int err[2]);
void spare_next(const struct sbx_exec_req *req, char **env);
void spare_idle(void);

/* xfer.c */
extern struct xfer *xfers;
struct xfer *xfer_new(struct conn *c, uint32_t stream, enum xkind kind);
void xfer_release(struct xfer *x);
void xfer_end(struct xfer *x, int code, int sig, uint8_t flags);
void xfer_cancel(struct xfer *x);
int errno_code(int e);
void xfer_fail(struct xfer *x, int e);
void answer(struct conn *c, uint32_t stream, int e);
void xfer_service(struct xfer *x);
void proc_xfers_service(struct proc *p);

/* attach.c */
void attach_service(struct xfer *x);
void pstdin_service(struct xfer *x);
void on_attach(struct conn *c, uint32_t stream, const struct sbx_attach_req *req);
void on_procs(struct conn *c, uint32_t stream);
void on_pstdin(struct conn *c, uint32_t stream, uint32_t pid, const uint8_t *data, size_t len);
void on_psignal(struct conn *c, uint32_t stream, uint32_t pid, uint32_t sig);

/* file.c */
void read_service(struct xfer *x);
void list_service(struct xfer *x);
int mkdir_p(const char *path, mode_t mode);
void file_write_data(struct xfer *x, const uint8_t *data, size_t len);
void on_file(struct conn *c, uint32_t stream, const struct sbx_file_req *req);

#endif

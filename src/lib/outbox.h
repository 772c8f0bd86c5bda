/* Publishing without waiting for the broker: messages go into a bounded
 * queue that a thread of the process empties over a connection of its own
 * (outbox.c). A broker that is slow, down or blocking publishers (a memory
 * or disk alarm stops reading a publishing connection) then stops only that
 * thread, never the caller's loop: the node agent serves a thousand
 * sandboxes from one loop (issue 10, doc/node-relay.md "Publishing").
 *
 * Order is kept: one queue, one connection, published in the order put.
 * What the queue holds is bounded in bytes (a put beyond it is refused and
 * counted) and in age (while the broker cannot be reached, what waited
 * longer than SBX_OUTBOX_MAX_AGE_MS is dropped and counted: no one waits
 * for an answer that long). */
#ifndef SBX_OUTBOX_H
#define SBX_OUTBOX_H
#include <stddef.h>
#include "err.h"
#include "mq.h"

#define SBX_OUTBOX_MAX_AGE_MS 60000

typedef struct sbx_outbox sbx_outbox;

/* Starts the thread (its connection is made on the first message). Every
 * message carries boot_id as its app_id (sbx_mq_set_boot_id); hold_file,
 * when set, is a fault point for tests: while that file exists the thread
 * publishes nothing, as if the broker had stopped reading. */
int sbx_outbox_open(sbx_outbox **out, const char *url, const char *boot_id, size_t max_bytes,
		    const char *hold_file, sbx_err *err);
/* Queues one message (copied); never waits for the broker. -1 with err
 * when the queue is full or out of memory: the message is lost. A NULL
 * request_id is the caller's current one (sbx_log_request_id), as with
 * sbx_mq_publish. */
int sbx_outbox_put(sbx_outbox *ob, const char *routing_key, const void *body, size_t len,
		   const struct sbx_mq_pub *p, sbx_err *err);
/* Waits up to drain_ms for what is queued to go out, then stops the thread
 * and frees everything (what is left is counted in the log as lost). */
void sbx_outbox_close(sbx_outbox *ob, int drain_ms);
/* Messages and bytes queued now, and lost so far. */
void sbx_outbox_stats(sbx_outbox *ob, long *queued, size_t *bytes, long *lost);
#endif

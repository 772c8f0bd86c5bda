/* Proving which sandbox is at each end of an sbx-init channel (the v3
 * handshake in frame.h). The key is per sandbox, random, 32 bytes: the node
 * agent keeps it in the sandbox's host directory (never inside the sandbox's
 * filesystem) and hands it to sbx-init in its environment at start. Linked
 * into the static sbx-init too: libc only (the MAC is blake2b.c's). */
#ifndef SBX_CHANAUTH_H
#define SBX_CHANAUTH_H

#include <stddef.h>
#include <stdint.h>
#include "err.h"
#include "frame.h"

#define SBX_CHAN_KEY_LEN 32
#define SBX_CHAN_KEY_HEX (2 * SBX_CHAN_KEY_LEN)
/* The environment variables sbx-init reads (and removes) at start. */
#define SBX_CHAN_KEY_ENV "SBX_CHANNEL_KEY"
#define SBX_CHAN_ID_ENV "SBX_SANDBOX_ID"
/* a file the key was rendered into before sbx-init started (a Nomad
 * template, doc/nomad.md): sbx-init removes it; only an absolute path */
#define SBX_CHAN_KEY_FILE_ENV "SBX_CHANNEL_KEY_FILE"
#define SBX_CHAN_ID_MAX 64 /* the id the handshake names: [0-9a-z-], 1..64 */

/* mac = BLAKE2b-256(key; "sbx-chan3 " role nonce id); role "node" or "init". */
void sbx_chan_mac(const uint8_t key[SBX_CHAN_KEY_LEN], const char *role,
		  const uint8_t nonce[SBX_CHAN_NONCE_LEN], const char *id, uint8_t out[SBX_CHAN_MAC_LEN]);
/* Constant-time check of a MAC received from the other end. 1 good, 0 not. */
int sbx_chan_mac_ok(const uint8_t key[SBX_CHAN_KEY_LEN], const char *role,
		    const uint8_t nonce[SBX_CHAN_NONCE_LEN], const char *id,
		    const uint8_t mac[SBX_CHAN_MAC_LEN]);
/* Random bytes from the kernel (nonces, keys). */
int sbx_chan_random(uint8_t *out, size_t n, sbx_err *err);
/* Key <-> lowercase hex (exactly SBX_CHAN_KEY_HEX characters). */
int sbx_chan_key_parse(const char *hex, uint8_t key[SBX_CHAN_KEY_LEN], sbx_err *err);
void sbx_chan_key_hex(const uint8_t key[SBX_CHAN_KEY_LEN], char out[SBX_CHAN_KEY_HEX + 1]);

/* The host's side of the handshake, one step at a time (the node agent's
 * loop does it on a non-blocking socket, in its epoll, so that an sbx-init
 * slow to say HELLO holds up no other sandbox). */
enum { SBX_HS_HELLO, SBX_HS_AUTH_OK, SBX_HS_DONE };
struct sbx_chan_hs {
	int step;
	uint8_t key[SBX_CHAN_KEY_LEN];
	char id[SBX_CHAN_ID_MAX + 1];
	uint8_t nonce_n[SBX_CHAN_NONCE_LEN];
	uint8_t buf[SBX_FRAME_HDR + SBX_AUTH_LEN + 16];
	size_t got;
};
void sbx_chan_hs_init(struct sbx_chan_hs *h, const uint8_t key[SBX_CHAN_KEY_LEN], const char *id);
/* One read() (and the AUTH write once HELLO is in): 1 the handshake is
 * done, 0 it waits for more from sbx-init, -1 it failed. Never reads past
 * the handshake's frames. */
int sbx_chan_hs_step(struct sbx_chan_hs *h, int fd, sbx_err *err);
/* Wipes the key and nonces. */
void sbx_chan_hs_clear(struct sbx_chan_hs *h);

/* The host's side of the handshake on a connected, blocking socket: reads
 * HELLO (version checked), sends AUTH, reads AUTH_OK and checks its MAC,
 * all within timeout_ms. Afterwards the channel carries requests. */
int sbx_chan_client_handshake(int fd, const uint8_t key[SBX_CHAN_KEY_LEN], const char *id, int timeout_ms,
			      sbx_err *err);

#endif

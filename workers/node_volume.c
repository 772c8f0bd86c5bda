/* The node agent's side of volumes that is not a request: removing images
 * no live record owns. A delete is written down first (deleted_at) and
 * finished here when the request did not get through; an image with no
 * record at all is a create whose record never came (the API died between
 * the node's answer and its insert) and goes once it is old enough that no
 * insert can still be on its way; a .tmp image is an interrupted create once
 * it is older than a start may take. A volume mounted for a sandbox Nomad
 * was to run here (nomad_vol.h) that was never adopted is a create given
 * up once it is older than a start may take: unmounted. */
#include "config.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "cleanup.h"
#include "host.h"
#include "log.h"
#include "nomad_vol.h"
#include "node_int.h"
#include "volume.h"

/* an image with no record is kept this long (seconds): a create's insert
 * follows the node's answer within an RPC deadline */
#define UNRECORDED_GRACE_S 600
/* a .tmp image younger than this may still be being made (a start's volume
 * step is bounded by start_timeout) */
#define TMP_GRACE_S(n) (sbx_cfg_int((n)->cfg, "start_timeout") + 30)

static void remove_image(struct node *n, const char *vid, bool drop_row)
{
	sbx_err err = SBX_ERR_INIT;

	if (volume_delete(&n->sc, vid, &err) < 0) {
		log_warnx("volume %s: removing its image: %s (next pass retries)", vid, err.msg);
		return;
	}
	log_info("volume %s: image removed (no live record owns it)", vid);
	if (drop_row &&
	    sbx_db_query(&n->db, NULL, &err, "DELETE FROM volumes WHERE id = $1 AND deleted_at IS NOT NULL", 1, vid) < 0)
		log_warnx("volume %s: %s", vid, err.msg);
}

/* Mounts for Nomad's tasks whose sandbox is not adopted here: a create
 * between its mount and its adoption is younger than a start may take. */
static void reap_nomad_mounts(struct node *n)
{
	char **ids = NULL;
	size_t nn = 0;
	sbx_err err = SBX_ERR_INIT;

	if (nomad_vol_list(&n->sc, &ids, &nn, &err) < 0) {
		log_warnx("volume pass: %s", err.msg);
		return;
	}
	for (size_t i = 0; i < nn; i++) {
		long long age = nomad_vol_age_s(&n->sc, ids[i]);

		if (node_op_find(n, ids[i]) || sandbox_adopted(&n->sc, ids[i]) || (age >= 0 && age < TMP_GRACE_S(n)))
			continue;
		err = (sbx_err)SBX_ERR_INIT;
		if (nomad_vol_unmount(&n->sc, ids[i], &err) < 0)
			log_warnx("sandbox %s: unmounting the volume of a create given up: %s", ids[i], err.msg);
		else
			log_info("sandbox %s: unmounted the volume of a create given up (never adopted)", ids[i]);
	}
	host_strv_free(ids, nn);
}

void reap_volumes(struct node *n)
{
	char **ids = NULL;
	bool *tmp = NULL;
	size_t nn = 0;
	sbx_err err = SBX_ERR_INIT;
	cleanup_pgres PGresult *del = NULL;

	reap_nomad_mounts(n);
	if (volume_list(&n->sc, &ids, &tmp, &nn, &err) < 0) {
		log_warnx("volume pass: %s", err.msg);
		return;
	}
	for (size_t i = 0; i < nn; i++) {
		cleanup_pgres PGresult *r = NULL;
		char img[450], path[460];
		struct stat st;

		if (node_op_find(n, ids[i]))
			continue; /* a create or delete is at work on it */
		volume_image_path(&n->sc, ids[i], img, sizeof(img));
		snprintf(path, sizeof(path), "%s%s", img, tmp[i] ? ".tmp" : "");
		if (tmp[i]) {
			/* a persistent sandbox's start makes its volume's image in its
			 * own process (no op of the volume's id): a young .tmp may be
			 * one being made; an interrupted one is old */
			if (stat(path, &st) == 0 && time(NULL) - st.st_mtime < TMP_GRACE_S(n))
				continue;
			if (volume_remove_tmp(&n->sc, ids[i], &err) < 0)
				log_warnx("volume %s: %s", ids[i], err.msg);
			else
				log_info("volume %s: removed an interrupted create's image", ids[i]);
			continue;
		}
		if (sbx_db_query(&n->db, &r, &err, "SELECT deleted_at IS NOT NULL FROM volumes WHERE id = $1", 1,
				 ids[i]) < 0) {
			log_warnx("volume pass: %s", err.msg);
			goto out; /* without the records, remove nothing */
		}
		if (PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 'f')
			continue;
		if (PQntuples(r) == 0 && (stat(path, &st) < 0 || time(NULL) - st.st_mtime < UNRECORDED_GRACE_S))
			continue;
		remove_image(n, ids[i], PQntuples(r) == 1);
	}
	/* deletes written down whose image is already gone: the row goes */
	if (sbx_db_query(&n->db, &del, &err,
			 "SELECT id FROM volumes WHERE node_id = $1 AND deleted_at IS NOT NULL", 1, n->node_id) == 0) {
		for (int i = 0; i < PQntuples(del); i++) {
			const char *vid = PQgetvalue(del, i, 0);
			char img[450];
			struct stat st;

			volume_image_path(&n->sc, vid, img, sizeof(img));
			if (!node_op_find(n, vid) && lstat(img, &st) < 0)
				remove_image(n, vid, true);
		}
	}
out:
	host_strv_free(ids, nn);
	free(tmp);
}

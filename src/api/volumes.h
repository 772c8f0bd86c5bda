/* Volumes as the API sees them (h_volumes.c), shared with the sandbox
 * create (persistent, volumeId). */
#ifndef SBX_API_VOLUMES_H
#define SBX_API_VOLUMES_H

#include <stdbool.h>
#include <stddef.h>
#include "api.h"

/* ^[a-z0-9-]{1,40}$ */
bool api_volume_name_ok(const char *s);
/* 400 unless volume_min_gb <= gb <= volume_max_gb (field names the field). */
int api_volume_size_check(const sbx_config *cfg, const char *field, long long gb, sbx_err *err);
/* 403 when one more volume of gb GB exceeds the organisation's plan. */
int api_volume_limits(struct api_req *r, long long gb, sbx_err *err);
/* The node a new volume goes to (the live node heard from last); 503 when none. */
int api_volume_node(struct api_req *r, char *node, size_t nodesz, sbx_err *err);

void h_volumes_list(struct api_req *r);
void h_volumes_create(struct api_req *r);
void h_volume_get(struct api_req *r);
void h_volume_delete(struct api_req *r);

#endif

#!/bin/bash
# test: parallel
# The contract test: doc/openapi.json against the running sbx-api, driven
# straight over its FastCGI socket (t/fcgi/fcgi-req). The checks themselves
# are in t/openapi-check.py (python3, standard library only), which prints
# the TAP: every documented path + method is routed (planned ones answer
# 501), nothing undocumented is served, the answers of the implemented
# operations validate against their schemas, and a created sandbox record
# has every field of the Sandbox schema.
. "$(dirname "$0")/lib.sh"
require_stack
command -v python3 > /dev/null || bail "python3 is missing"

python3 "$SBX_REPO/t/openapi-check.py" \
	--spec "$SBX_REPO/doc/openapi.json" \
	--router-h "$SBX_REPO/src/lib/router.h" \
	--router-c "$SBX_REPO/src/lib/router.c" \
	--fcgi "$FCGI_REQ" \
	--socket "$SBX_API_SOCKET" \
	--key "$SBX_KEY"

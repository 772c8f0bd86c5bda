#!/bin/bash
# test: parallel
# sbx-admin: organisations, keys (token printed once, only a keyed hash
# stored), list, revoke, rotate, limits; migrate is idempotent.
. "$(dirname "$0")/lib.sh"
require_stack

name=$(uniq_name it-adm)
out=$(admin org create "$name" 2> "$T_TMP/err")
ok $? "org create exits 0"
like "$out" '^[0-9a-f]{24}$' "org create prints only the id"
ORG=$out
admin org create "$name" > "$T_TMP/out" 2> "$T_TMP/err"
isnt $? 0 "creating the same name again fails"
is "$(cat "$T_TMP/out")" "" "... and prints nothing on stdout"
admin org create 'Bad Name!' > /dev/null 2>&1
isnt $? 0 "an invalid organisation name is refused"
list=$(admin org list 2> /dev/null)
like "$list" "$ORG +$name" "org list shows the organisation"
is "$(psql_q "SELECT name FROM orgs WHERE id = '$ORG'")" "$name" "the database has it"

# Issue: the token on stdout, once, alone.
admin key issue "$ORG" --name ci > "$T_TMP/out" 2> "$T_TMP/err"
ok $? "key issue exits 0"
TOKEN=$(cat "$T_TMP/out")
like "$TOKEN" '^sbx_[0-9a-f]{64}$' "stdout is exactly the token (sbx_ + 64 hex)"
is "$(wc -l < "$T_TMP/out")" 1 "one line on stdout"
unlike "$(cat "$T_TMP/err")" "${TOKEN:12}" "stderr does not repeat the token"
TOKEN_BY_NAME=$(admin key issue "$name" 2> /dev/null)
like "$TOKEN_BY_NAME" '^sbx_[0-9a-f]{64}$' "key issue by organisation name"
isnt "$TOKEN_BY_NAME" "$TOKEN" "two keys differ"
admin key issue "$(random_id)" > "$T_TMP/out" 2> /dev/null
isnt $? 0 "key issue for an unknown organisation fails"
is "$(cat "$T_TMP/out")" "" "... and prints no token"

# Only a hash is stored: no column of any row holds the token or its secret part.
secret=${TOKEN#sbx_}
rows=$(psql_q "SELECT row_to_json(k)::text FROM api_keys k WHERE org_id = '$ORG'")
is "$(grep -c . <<< "$rows")" 2 "two api_keys rows for the organisation"
unlike "$rows" "$secret" "no api_keys row contains the token"
unlike "$rows" "${secret:0:40}" "no api_keys row contains most of the token"
unlike "$(psql_q "SELECT encode(hash, 'hex') FROM api_keys WHERE org_id = '$ORG'")" "$secret" \
	"the hash column is not the token's hex"
is "$(psql_q "SELECT DISTINCT length(hash) FROM api_keys WHERE org_id = '$ORG'")" 32 "hash is 32 bytes"
if command -v pg_dump > /dev/null; then
	url=${SBX_DB_URL:-$(conf_get db_url)}
	pg_dump "$url" > "$T_TMP/dump.sql" 2> /dev/null
	ok '[ -s "$T_TMP/dump.sql" ]' "pg_dump of the whole database"
	ok "! grep -q '$secret' '$T_TMP/dump.sql'" "the whole database dump does not contain the token"
fi

# The token authenticates (FastCGI straight, no nginx needed).
REQ_AUTH="x-api-key: $TOKEN" req fcgi GET /sandboxes
is "$STATUS" 200 "the issued token authenticates"

# List: id, name, prefix; never the token.
klist=$(admin key list "$ORG" 2> /dev/null)
ok $? "key list exits 0"
unlike "$klist" "$secret" "key list does not show the token"
KID=$(key_id_of_token "$ORG" "$TOKEN")
like "$KID" '^[0-9a-f]{24}$' "key list shows a prefix of the token, with the key's id"
like "$(grep "^$KID" <<< "$klist")" ' ci ' "key list shows the key's name"
prefix=$(psql_q "SELECT prefix FROM api_keys WHERE id = '$KID'")
ok '[ ${#prefix} -ge 4 ] && [ ${#prefix} -le 16 ]' "the stored prefix is short (${#prefix} chars)"

# Revoke.
admin key revoke "$KID" > /dev/null 2>&1
ok $? "key revoke exits 0"
ok "[ -n \"\$(psql_q \"SELECT revoked_at FROM api_keys WHERE id = '$KID'\")\" ]" "revoked_at is set"
like "$(admin key list "$ORG" 2> /dev/null | grep "^$KID")" '[0-9]{4}-[0-9]{2}-[0-9]{2}' "key list shows when it was revoked"
REQ_AUTH="x-api-key: $TOKEN" req fcgi GET /sandboxes
is "$STATUS" 401 "the revoked token: 401"
admin key revoke "$KID" > /dev/null 2>&1
isnt $? 0 "revoking it again fails"
admin key revoke "$(random_id)" > /dev/null 2>&1
isnt $? 0 "revoking an unknown key fails"
admin key revoke nothex > /dev/null 2>&1
isnt $? 0 "revoking a malformed id fails"

# Rotate.
KID2=$(key_id_of_token "$ORG" "$TOKEN_BY_NAME")
NEW=$(admin key rotate "$KID2" 2> /dev/null)
ok $? "key rotate exits 0"
like "$NEW" '^sbx_[0-9a-f]{64}$' "rotate prints the new token alone"
REQ_AUTH="x-api-key: $TOKEN_BY_NAME" req fcgi GET /sandboxes
is "$STATUS" 401 "the rotated-away token: 401"
REQ_AUTH="x-api-key: $NEW" req fcgi GET /sandboxes
is "$STATUS" 200 "the new token: 200"
NKID=$(key_id_of_token "$ORG" "$NEW")
is "$(psql_q "SELECT rotated_from FROM api_keys WHERE id = '$NKID'")" "$KID2" "the new key records what it replaced"
admin key rotate "$KID2" > "$T_TMP/out" 2> /dev/null
isnt $? 0 "rotating a revoked key fails"
is "$(cat "$T_TMP/out")" "" "... and prints no token"

# Limits.
admin org limits "$ORG" --max-sandboxes 3 --max-memory-mb 1024 --max-volume-gb 20 --max-volumes 2 > /dev/null 2>&1
ok $? "org limits exits 0"
is "$(psql_q "SELECT concat_ws(',', max_sandboxes, max_memory_mb, max_volume_gb, max_volumes) FROM orgs WHERE id = '$ORG'")" \
	"3,1024,20,2" "the limits are stored"
like "$(admin org list 2> /dev/null | grep "^$ORG")" 'sandboxes=3' "org list shows the limits"
admin org limits "$ORG" --max-sandboxes abc > /dev/null 2>&1
isnt $? 0 "a non-numeric limit is refused"
admin org limits "$ORG" --max-sandboxes -1 > /dev/null 2>&1
isnt $? 0 "a negative limit is refused"
admin org limits "$ORG" --bogus 1 > /dev/null 2>&1
isnt $? 0 "an unknown limit is refused"
is "$(psql_q "SELECT max_sandboxes FROM orgs WHERE id = '$ORG'")" 3 "refused changes changed nothing"

# Migrate twice: harmless.
before=$(psql_q "SELECT count(*) FROM schema_migrations")
admin migrate > "$T_TMP/m1" 2>&1
ok $? "migrate (again) exits 0"
admin migrate > "$T_TMP/m2" 2>&1
ok $? "migrate a third time exits 0"
like "$(cat "$T_TMP/m2")" '0 applied' "nothing applied the second time"
is "$(psql_q "SELECT count(*) FROM schema_migrations")" "$before" "schema_migrations unchanged"
is "$(psql_q "SELECT name FROM orgs WHERE id = '$ORG'")" "$name" "data intact after migrate"
REQ_AUTH="x-api-key: $NEW" req fcgi GET /sandboxes
is "$STATUS" 200 "keys still work after migrate"

finish

-- sbx-api keeps what a key resolves to (its organisation, admin flag and the
-- organisation's limits) in a small per-process cache, so most requests
-- cost no auth query (issue 10; doc/api.md "Authentication"). Every change
-- that could make a cached answer wrong is announced on channel sbx_auth,
-- and each API process drops its whole cache when it hears it (before the
-- next request it serves). Changes of last_used_at do not count: that
-- column is written once a minute and says nothing about access.
CREATE FUNCTION sbx_auth_notify() RETURNS trigger
	LANGUAGE plpgsql AS
$$ BEGIN
	PERFORM pg_notify('sbx_auth', TG_TABLE_NAME);
	RETURN NULL;
END $$;

CREATE TRIGGER api_keys_auth_notify
	AFTER UPDATE OF hash, org_id, is_admin, revoked_at OR DELETE ON api_keys
	FOR EACH STATEMENT EXECUTE FUNCTION sbx_auth_notify();

CREATE TRIGGER orgs_auth_notify
	AFTER UPDATE OR DELETE ON orgs
	FOR EACH STATEMENT EXECUTE FUNCTION sbx_auth_notify();

-- The timestamps of the sandbox and volume views (sbx_time) are inlined
-- into the queries that use them, as the views themselves are (sql/018).
-- sbx_time was declared IMMUTABLE, but its body calls to_char(timestamp,
-- text), which is STABLE: Postgres inlines a LANGUAGE sql function only
-- when its body is no more volatile than its declaration, so each of the
-- five sbx_time calls of a sandbox's JSON ran as a function call whose body
-- was parsed and planned again at every query (perf on bench/api-get:
-- base_yyparse the first symbol of the database's CPU). STABLE is what it
-- is; nothing indexes on it.
CREATE OR REPLACE FUNCTION sbx_time(t timestamptz) RETURNS text
	LANGUAGE sql STABLE AS
$$ SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') $$;

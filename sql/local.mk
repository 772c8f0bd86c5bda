sqldir = $(pkgdatadir)/sql
dist_sql_DATA = sql/001_init.sql sql/002_status_notify.sql sql/003_nodes.sql \
	sql/004_execs.sql sql/005_org_concurrency.sql sql/006_project_environment.sql \
	sql/007_placement.sql sql/008_egress.sql sql/009_persistence.sql sql/010_templates.sql \
	sql/013_auth_notify.sql sql/014_snapshots.sql sql/015_nomad.sql sql/016_limits.sql \
	sql/017_stats.sql sql/018_sandbox_json_inline.sql sql/019_status_notify_waiters.sql \
	sql/020_sbx_time_stable.sql

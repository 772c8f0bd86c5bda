# The sbx node agent on every Nomad client of the sandbox pool (doc/nomad.md).
#
# The Nomad driver (driver = nomad) places each sandbox as a job of its own;
# what happens inside a running sandbox (exec, files, egress rules,
# snapshots) is the work of the node agent on the same machine, reached
# over RabbitMQ by its node id. This system job runs that agent, one per
# client, with node_id = the Nomad node's name: the name the driver reads
# from the sandbox's allocation (NodeName) and writes on the record.
#
# The agent is privileged (runsc, network namespaces, nftables, loop
# devices), so it runs with raw_exec, which the clients of this pool must
# enable (plugin "raw_exec" { config { enabled = true } }). Only this job,
# in its own namespace, may use raw_exec: see the ACL policy in doc/nomad.md.
#
# Secrets come from the Nomad variable nomad/jobs/sbx-node (namespace
# sbx-system), items db_url and amqp_url:
#   nomad var put -namespace sbx-system nomad/jobs/sbx-node \
#       db_url='host=db.internal dbname=sbx user=sbx password=...' \
#       amqp_url='amqp://sbx:...@mq.internal:5672/sbx'
#
#   nomad job run nomad/sbx-node.nomad.hcl
job "sbx-node" {
  type      = "system"
  namespace = "sbx-system"
  node_pool = "sandbox"

  group "node" {
    # the agent itself may restart (sandboxes keep running under runsc and
    # are adopted again); it is never rescheduled elsewhere: it is per node
    restart {
      attempts = 10
      interval = "10m"
      delay    = "5s"
      mode     = "delay"
    }

    task "sbx-worker" {
      driver = "raw_exec"

      config {
        command = "/usr/sbin/sbx-worker"
        args    = ["-c", "${NOMAD_SECRETS_DIR}/sbx.conf", "-f"]
      }

      # A changed variable re-renders the config; the master reloads on
      # SIGHUP and keeps the old config if the new one is bad.
      template {
        destination   = "${NOMAD_SECRETS_DIR}/sbx.conf"
        perms         = "600"
        change_mode   = "signal"
        change_signal = "SIGHUP"
        data          = <<-EOT
          {{- with nomadVar "nomad/jobs/sbx-node" }}
          db_url = {{ .db_url }}
          amqp_url = {{ .amqp_url }}
          {{- end }}
          node_id = {{ env "node.unique.name" }}
          state_dir = /var/lib/sbx
          # the client's data_dir/alloc: the agent reaches the sbx-init of
          # each sandbox Nomad runs here in its allocation's directory
          nomad_alloc_dir = /var/lib/nomad/alloc
          # sbx-cni (the CNI network sbx's plugin) asks the agent here to
          # wire each allocation's network namespace (doc/nomad.md)
          nomad_cni_socket = /run/sbx/cni.sock
          worker_pidfile = /run/sbx/sbx-worker.pid
          registry_url = http://registry.service.consul:5000
          # only the node agent here: provisioners and reapers run where
          # sbx-worker has driver = nomad (any machine, any number)
          worker_nodes = 1
          worker_provisioners = 0
          worker_reapers = 0
          EOT
      }

      # drain: the master finishes what it holds (drain_timeout) first
      kill_signal  = "SIGTERM"
      kill_timeout = "45s"

      resources {
        cpu    = 500
        memory = 512
      }
    }
  }
}

# Files that ship in the tarball but are not built.
EXTRA_DIST += nginx init scripts templates doc bench .ci nomad t/nomad-contract
EXTRA_DIST += t/openapi-check.py t/integration

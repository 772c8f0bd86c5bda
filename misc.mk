# Files that ship in the tarball but are not built.
EXTRA_DIST += nginx init scripts templates doc bench .ci
EXTRA_DIST += t/openapi-check.py t/integration

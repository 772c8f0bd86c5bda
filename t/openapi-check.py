#!/usr/bin/env python3
"""The contract test: doc/openapi.json against the running sbx-api.

Drives the FastCGI program directly with t/fcgi/fcgi-req (no nginx in the
way) and prints TAP. Python 3 standard library only.

  openapi-check.py --spec doc/openapi.json --router-h src/lib/router.h \
      --router-c src/lib/router.c --fcgi build/t/fcgi/fcgi-req \
      --socket .stack/run/api.sock --key sbx_...

What it proves:
  - the file is a well-formed OpenAPI 3.0 document whose $refs resolve;
  - (a) every path + method of the file is routed by the server, at the root
    and under /v1: never 404 "Not found" nor 405; operations marked
    `x-sbx-status: planned` answer 501, the others do not; methods the file
    does not declare on a path answer 405 with an Allow header naming exactly
    the declared ones; the router's own list (router.h comments, router.c
    table) equals the file's; paths next to the real ones are 404;
  - (b) every answer of an implemented operation has a status the file
    documents, the documented media type, and a body that validates against
    the documented schema (a small JSON-schema subset, below);
  - (c) a created sandbox record validates against the Sandbox schema with
    every field present, in the list and in GET /sandboxes/{id}, and DELETE
    behaves as documented;
  - (d) with that sandbox ready, every implemented runtime route answers a
    real request (exec JSON/SSE/NDJSON, code, files PUT with and without a
    Content-Length, GET, list, batch, DELETE, background processes, wait)
    with a documented status and a body that validates: the shapes the
    official clients read are checked live, not only their error answers.
"""

import argparse
import json
import os
import re
import subprocess
import sys

METHODS = ("get", "post", "put", "delete")


# ---- TAP ------------------------------------------------------------------

class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def diag(self, text):
        for line in str(text).splitlines() or [""]:
            print("# " + line)

    def ok(self, cond, msg, why=None):
        self.n += 1
        if cond:
            print("ok %d - %s" % (self.n, msg))
        else:
            self.failed += 1
            print("not ok %d - %s" % (self.n, msg))
            if why:
                self.diag(why)
        sys.stdout.flush()
        return bool(cond)

    def skip(self, msg, why):
        self.n += 1
        print("ok %d - %s # SKIP %s" % (self.n, msg, why))

    def done(self):
        print("1..%d" % self.n)
        if self.failed:
            self.diag("failed %d of %d" % (self.failed, self.n))
        return 1 if self.failed else 0


# ---- the JSON-schema subset ---------------------------------------------

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


class Spec:
    def __init__(self, doc):
        self.doc = doc

    def resolve(self, ref):
        if not ref.startswith("#/"):
            raise KeyError("only local $refs: " + ref)
        node = self.doc
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            node = node[part]
        return node

    def deref(self, node):
        seen = 0
        while isinstance(node, dict) and "$ref" in node:
            node = self.resolve(node["$ref"])
            seen += 1
            if seen > 50:
                raise KeyError("$ref loop")
        return node

    def validate(self, value, schema, where="$"):
        """Returns a list of error strings (empty: valid)."""
        schema = self.deref(schema)
        errs = []
        if schema is True or schema == {}:
            return errs
        if value is None:
            if schema.get("nullable"):
                return errs
            # nullable on an allOf wrapper around a $ref
            return ["%s: null where the schema does not allow null" % where]
        for sub in schema.get("allOf", []):
            errs += self.validate(value, sub, where)
        if "oneOf" in schema:
            good = [i for i, sub in enumerate(schema["oneOf"]) if not self.validate(value, sub, where)]
            if len(good) != 1:
                errs.append("%s: matches %d of the oneOf alternatives (need exactly 1)" % (where, len(good)))
        if "anyOf" in schema:
            if not any(not self.validate(value, sub, where) for sub in schema["anyOf"]):
                errs.append("%s: matches none of anyOf" % where)
        t = schema.get("type")
        if t:
            okt = {
                "string": isinstance(value, str),
                "integer": isinstance(value, int) and not isinstance(value, bool),
                "number": isinstance(value, (int, float)) and not isinstance(value, bool),
                "boolean": isinstance(value, bool),
                "object": isinstance(value, dict),
                "array": isinstance(value, list),
            }.get(t)
            if okt is None:
                return errs + ["%s: schema has unknown type %r" % (where, t)]
            if not okt:
                return errs + ["%s: %s where the schema wants %s" % (where, type(value).__name__, t)]
        if "enum" in schema and value not in schema["enum"]:
            errs.append("%s: %r is not one of %r" % (where, value, schema["enum"]))
        if isinstance(value, str):
            if "minLength" in schema and len(value) < schema["minLength"]:
                errs.append("%s: shorter than %d" % (where, schema["minLength"]))
            if "maxLength" in schema and len(value) > schema["maxLength"]:
                errs.append("%s: longer than %d" % (where, schema["maxLength"]))
            if "pattern" in schema and not re.search(schema["pattern"], value):
                errs.append("%s: %r does not match /%s/" % (where, value, schema["pattern"]))
            if schema.get("format") == "date-time" and not RFC3339.match(value):
                errs.append("%s: %r is not an RFC 3339 time" % (where, value))
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if "minimum" in schema and value < schema["minimum"]:
                errs.append("%s: %r < minimum %r" % (where, value, schema["minimum"]))
            if "maximum" in schema and value > schema["maximum"]:
                errs.append("%s: %r > maximum %r" % (where, value, schema["maximum"]))
        if isinstance(value, list):
            if "minItems" in schema and len(value) < schema["minItems"]:
                errs.append("%s: fewer than %d items" % (where, schema["minItems"]))
            if "maxItems" in schema and len(value) > schema["maxItems"]:
                errs.append("%s: more than %d items" % (where, schema["maxItems"]))
            if "items" in schema:
                for i, item in enumerate(value):
                    errs += self.validate(item, schema["items"], "%s[%d]" % (where, i))
        if isinstance(value, dict):
            props = schema.get("properties", {})
            for k in schema.get("required", []):
                if k not in value:
                    errs.append("%s: required field %r is missing" % (where, k))
            if "maxProperties" in schema and len(value) > schema["maxProperties"]:
                errs.append("%s: more than %d fields" % (where, schema["maxProperties"]))
            extra = schema.get("additionalProperties", True)
            for k, v in value.items():
                if k in props:
                    errs += self.validate(v, props[k], "%s.%s" % (where, k))
                elif extra is False:
                    errs.append("%s: field %r is not in the schema (additionalProperties: false)" % (where, k))
                elif isinstance(extra, dict):
                    errs += self.validate(v, extra, "%s.%s" % (where, k))
        return errs


def all_refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield v
            else:
                yield from all_refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from all_refs(v)


# ---- talking to sbx-api -------------------------------------------------

class Resp:
    def __init__(self, status, headers, body, err=""):
        self.status = status
        self.headers = headers  # lower-case name -> value
        self.body = body
        self.err = err
        self.json = None
        self.json_ok = False
        try:
            self.json = json.loads(body) if body else None
            self.json_ok = bool(body)
        except ValueError:
            pass

    def ctype(self):
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    def show(self):
        h = "; ".join("%s: %s" % kv for kv in sorted(self.headers.items()))
        return "status %s, headers [%s], body %s%s" % (self.status, h, self.body[:500],
                                                      (", error " + self.err) if self.err else "")


class Client:
    def __init__(self, fcgi, socket, key):
        self.fcgi = fcgi
        self.socket = socket
        self.key = key

    def req(self, method, uri, body=None, ctype="application/json", auth=True, headers=(), timeout=60, params=()):
        args = [self.fcgi, "-t", str(timeout), "-s", self.socket, "-m", method, "-u", uri]
        if auth:
            args += ["-H", "Authorization: Bearer " + self.key]
        for h in headers:
            args += ["-H", h]
        for prm in params:
            args += ["-p", prm]
        if body is not None:
            args += ["-H", "Content-Type: " + ctype, "-d", body]
        try:
            p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout + 15)
        except subprocess.TimeoutExpired:
            return Resp(0, {}, "", "fcgi-req did not finish")
        out = p.stdout.decode("utf-8", "replace")
        if p.returncode != 0:
            return Resp(0, {}, "", "fcgi-req exit %d: %s" % (p.returncode, p.stderr.decode("utf-8", "replace").strip()))
        head, _, body_s = out.replace("\r\n", "\n").partition("\n\n")
        lines = head.split("\n")
        m = re.match(r"^HTTP/1\.[01] (\d{3})", lines[0])
        if not m:
            return Resp(0, {}, body_s, "no status line: %r" % lines[0])
        hdrs = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            hdrs.setdefault(name.strip().lower(), value.strip())
        return Resp(int(m.group(1)), hdrs, body_s)


# ---- helpers over the spec ----------------------------------------------

def rand_id():
    return os.urandom(12).hex()


def operations(doc):
    for path, item in doc["paths"].items():
        for m in METHODS:
            if m in item:
                yield path, m, item[m]


def concrete(path, ids):
    """The template with sample values: ids random but well-formed."""
    return (path.replace("{id}", ids["id"]).replace("{snapshotId}", ids["snapshotId"])
            .replace("{volumeId}", ids["volumeId"]).replace("{pid}", "4242")
            .replace("{path}", "tmp/openapi-check.txt"))


def template_regex(path):
    rx = ""
    for part in re.split(r"(\{[^}]+\})", path):
        if part == "{path}":
            rx += ".+"
        elif part.startswith("{"):
            rx += "[^/]+"
        else:
            rx += re.escape(part)
    return re.compile("^" + rx + "$")


def norm(path):
    return re.sub(r"\{[^}]*\}", "{}", path)


def sample_body(spec, op):
    """(body, content type) that reaches the handler; the body's content does not matter for routing."""
    rb = op.get("requestBody")
    if not rb:
        return None, None
    content = spec.deref(rb)["content"]
    if "application/json" in content:
        return "{}", "application/json"
    return "openapi-check\n", next(iter(content))


def check_response(spec, op, r, label):
    """Errors of response r against operation op's documented responses ([] = fine)."""
    if r.status == 0:
        return ["%s: no response (%s)" % (label, r.err)]
    resp = op["responses"].get(str(r.status)) or op["responses"].get("default")
    if resp is None:
        return ["%s: status %d is not documented (documented: %s)" % (label, r.status, ", ".join(op["responses"]))]
    resp = spec.deref(resp)
    errs = []
    for name in resp.get("headers", {}):
        if name.lower() not in r.headers:
            errs.append("%s: documented header %s is missing" % (label, name))
    content = resp.get("content")
    if not content:
        if r.body.strip():
            errs.append("%s: %d documents no body, got %r" % (label, r.status, r.body[:200]))
        return errs
    ct = r.ctype()
    if ct not in content:
        return errs + ["%s: Content-Type %r is not one of the documented %s" % (label, ct, list(content))]
    schema = content[ct].get("schema")
    if ct == "application/x-ndjson":
        # the schema is one line's: every line is one JSON value
        for i, line in enumerate(x for x in r.body.split("\n") if x.strip()):
            try:
                value = json.loads(line)
            except ValueError:
                return errs + ["%s: NDJSON line %d is not JSON: %r" % (label, i, line[:200])]
            errs += ["%s line %d: %s" % (label, i, e) for e in spec.validate(value, schema)]
        return errs
    if ct == "application/json":
        if not r.json_ok:
            return errs + ["%s: body is not JSON: %r" % (label, r.body[:200])]
        errs += ["%s: %s" % (label, e) for e in spec.validate(r.json, schema)]
    elif schema is not None:
        errs += ["%s: %s" % (label, e) for e in spec.validate(r.body, schema)]
    return errs


def is_not_found(r):
    return r.status == 404 and r.json_ok and isinstance(r.json, dict) and r.json.get("message") == "Not found"


# ---- the checks ------------------------------------------------------------

def check_document(t, spec):
    doc = spec.doc
    t.ok(str(doc.get("openapi", "")).startswith("3.0.") and "title" in doc.get("info", {}) and doc.get("paths"),
         "openapi.json: an OpenAPI 3.0 document with info and paths", "openapi=%r" % doc.get("openapi"))
    urls = [s.get("url", "") for s in doc.get("servers", [])]
    t.ok(any(u.endswith("/v1") for u in urls) and any(not u.endswith("/v1") for u in urls),
         "openapi.json: servers name the root and the /v1 prefix", "servers: %r" % urls)
    bad = []
    for ref in set(all_refs(doc)):
        try:
            spec.resolve(ref)
        except (KeyError, TypeError):
            bad.append(ref)
    t.ok(not bad, "openapi.json: every $ref resolves", "unresolved: %r" % bad)
    probs, ids = [], set()
    for path, m, op in operations(doc):
        where = "%s %s" % (m.upper(), path)
        if not op.get("operationId") or op["operationId"] in ids:
            probs.append(where + ": operationId missing or not unique")
        ids.add(op.get("operationId"))
        if not op.get("responses"):
            probs.append(where + ": no responses")
            continue
        for code, resp in op["responses"].items():
            resp = spec.deref(resp)
            if code[0] in "45" and not (path == "/healthz" and code == "503"):
                sch = resp.get("content", {}).get("application/json", {}).get("schema", {})
                if sch.get("$ref") != "#/components/schemas/Error":
                    probs.append("%s: %s is not the Error shape" % (where, code))
        if op.get("x-sbx-status") == "planned" and "501" not in op["responses"]:
            probs.append(where + ": planned but no 501 documented")
        if op.get("x-sbx-status") not in (None, "planned"):
            probs.append(where + ": unknown x-sbx-status %r" % op.get("x-sbx-status"))
        names = set()
        for p in doc["paths"][path].get("parameters", []) + op.get("parameters", []):
            p = spec.deref(p)
            if p.get("in") == "path":
                names.add(p["name"])
        want = set(re.findall(r"\{([^}]+)\}", path))
        if names != want:
            probs.append("%s: path parameters %s declared, %s in the template" % (where, sorted(names), sorted(want)))
    t.ok(not probs, "openapi.json: operations have unique ids, responses, the Error shape for errors, "
                    "their path parameters, 501 when planned", "\n".join(probs))
    sch = doc.get("components", {}).get("securitySchemes", {})
    got = set()
    for s in sch.values():
        if s.get("type") == "http" and s.get("scheme") == "bearer":
            got.add("authorization")
        if s.get("type") == "apiKey" and s.get("in") == "header":
            got.add(s.get("name", "").lower())
    t.ok(got == {"authorization", "x-api-key", "x-brimble-key"},
         "openapi.json: the three key headers are security schemes", "got %r" % sorted(got))
    env = spec.deref({"$ref": "#/components/schemas/Error"})
    t.ok(set(env.get("properties", {})) == {"message", "code", "data"}
         and set(env.get("required", [])) == {"message", "code"} and env.get("additionalProperties") is False,
         "openapi.json: the error shape is {message, code} (+ optional data), nothing else",
         json.dumps(env)[:300])


def router_routes(router_h, router_c):
    """(from router.h comments: {"GET /path"}, from router.c's table: {NAME: methods}, name map)."""
    comments = set()
    enum_of = {}
    with open(router_h) as f:
        for line in f:
            m = re.match(r"\s*(SBX_R_\w+),\s*/\*\s*([A-Z, ]+?)\s+(\S+)\s*\*/", line)
            if not m:
                continue
            path = m.group(3)
            if path.startswith("..."):
                path = "/sandboxes/{id}" + path[3:]
            meths = [x.strip() for x in m.group(2).split(",") if x.strip()]
            enum_of[m.group(1)] = set(meths)
            for x in meths:
                comments.add("%s %s" % (x, norm(path)))
    table = {}
    with open(router_c) as f:
        for m in re.finditer(r"\[(SBX_R_\w+)\]\s*=\s*\{\s*\"\w+\",\s*([^}]*)\}", f.read()):
            table[m.group(1)] = {x.strip().replace("SBX_M_", "") for x in m.group(2).split("|") if x.strip() != "0"}
    return comments, enum_of, table


def check_router_lists(t, spec, args):
    comments, enum_of, table = router_routes(args.router_h, args.router_c)
    table.pop("SBX_R_NONE", None)
    mine = {"%s %s" % (m.upper(), norm(p)) for p, m, _ in operations(spec.doc)}
    t.ok(len(comments) >= 20, "router.h comments list the routes (%d found)" % len(comments))
    t.ok(not (comments - mine), "every route router.h lists is in openapi.json",
         "missing from openapi.json: %s" % sorted(comments - mine))
    t.ok(not (mine - comments), "every operation of openapi.json is a route router.h lists",
         "not in router.h: %s" % sorted(mine - comments))
    t.ok(table and table == enum_of, "router.c's method table agrees with router.h's comments",
         "router.c: %r\nrouter.h: %r" % (sorted(table.items()), sorted(enum_of.items())))


def check_routing(t, spec, cl):
    """(a) and (b) for every operation: routed at the root and under /v1, planned ones 501, the
    others answer a documented, valid response."""
    doc = spec.doc
    ids = {"id": rand_id(), "snapshotId": rand_id(), "volumeId": rand_id()}
    for path, m, op in operations(doc):
        meth = m.upper()
        planned = op.get("x-sbx-status") == "planned"
        uri = concrete(path, ids)
        body, ctype = sample_body(spec, op)
        if (path, m) == ("/sandboxes", "post"):
            # a body the validation refuses: proves the route without creating anything (part c creates)
            body = '{"openapi_check_unknown_field": 1}'
        answers = {}
        for prefix in ("", "/v1"):
            answers[prefix] = cl.req(meth, prefix + uri, body=body, ctype=ctype or "application/json")
        r, r1 = answers[""], answers["/v1"]
        why = "root: %s\n/v1: %s" % (r.show(), r1.show())
        routed = all(x.status not in (0, 405) and not is_not_found(x) for x in (r, r1))
        if planned:
            want = all(x.status == 501 and isinstance(x.json, dict) and x.json.get("code") == "not_implemented"
                       for x in (r, r1))
        else:
            want = all(x.status != 501 for x in (r, r1))
        t.ok(routed and want and r.status == r1.status,
             "%s %s is routed at / and /v1 (%s: %s)" % (meth, path, "planned" if planned else "served",
                                                       r.status), why)
        errs = check_response(spec, op, r, "root") + check_response(spec, op, r1, "/v1")
        t.ok(not errs, "%s %s: %d is documented and its body validates" % (meth, path, r.status),
             "\n".join(errs) + "\n" + why)


def check_other_methods(t, spec, cl):
    """Methods the file does not declare on a path answer 405 with Allow = the declared ones,
    unless another documented path matches the same URL with that method (files/batch vs files/{path})."""
    doc = spec.doc
    ids = {"id": rand_id(), "snapshotId": rand_id(), "volumeId": rand_id()}
    order = ["GET", "POST", "PUT", "DELETE"]
    for path, item in doc["paths"].items():
        declared = [x for x in order if x.lower() in item]
        uri = concrete(path, ids)
        probs = []
        for meth in order:
            if meth in declared:
                continue
            # a literal segment wins over a template (OpenAPI's rule), except over the
            # multi-segment {path}: GET .../files/batch reads a file named "batch"
            other = [p for p in doc["paths"] if p != path and "{path}" in p and meth.lower() in doc["paths"][p]
                     and template_regex(p).match(uri)]
            r = cl.req(meth, uri, body="{}" if meth in ("POST", "PUT") else None)
            if other:
                op = doc["paths"][other[0]][meth.lower()]
                want = 501 if op.get("x-sbx-status") == "planned" else None
                if r.status in (0, 405) or is_not_found(r) or (want and r.status != want):
                    probs.append("%s %s should reach %s %s: %s" % (meth, uri, meth, other[0], r.show()))
                continue
            allow = [x.strip() for x in r.headers.get("allow", "").split(",") if x.strip()]
            if r.status != 405 or allow != declared:
                probs.append("%s %s: want 405 with Allow %s: %s" % (meth, uri, ", ".join(declared), r.show()))
            elif not r.json_ok or spec.validate(r.json, {"$ref": "#/components/schemas/Error"}):
                probs.append("%s %s: 405 body is not the Error shape: %s" % (meth, uri, r.body[:200]))
        t.ok(not probs, "%s: other methods answer 405 with Allow: %s" % (path, ", ".join(declared)), "\n".join(probs))


def check_neighbours(t, cl):
    """Paths next to the real ones are not served: the server routes nothing the file does not name."""
    i = rand_id()
    probes = ["/sandbox", "/templates", "/regions", "/sandbox/templates/debian-12", "/healthz/x", "/metrics/x",
              "/sandboxes/%s/nope" % i, "/sandboxes/%s/exec/x" % i, "/sandboxes/%s/processes/1/nope" % i,
              "/sandboxes/%s/processes/1/output/x" % i, "/sandboxes/snapshots/%s/restore" % i,
              "/volumes/%s/attach" % i, "/v1/v1/healthz", "/v2/healthz", "/sandboxes/regions/local",
              "/sandboxes/%s/snapshots/x" % i]
    probs = []
    for p in probes:
        for meth in ("GET", "POST"):
            r = cl.req(meth, p, body="{}" if meth == "POST" else None)
            # 400 invalid_id: a word where the router expects an id (/sandboxes/regions/x)
            if not (is_not_found(r) or (r.status == 400 and isinstance(r.json, dict)
                                        and r.json.get("code") == "invalid_id")):
                probs.append("%s %s: %s" % (meth, p, r.show()))
    t.ok(not probs, "paths the file does not name are not served: 404 Not found or 400 invalid id (%d probes)"
         % len(probes), "\n".join(probs))


def op_of(doc, path, m):
    return doc["paths"][path][m]


def check_answers(t, spec, cl):
    """(b) more answers of the implemented operations, the errors included."""
    doc = spec.doc
    cases = [
        ("GET", "/healthz?workers=1", None, True, "/healthz", "get", None),
        ("GET", "/sandboxes?page=1&limit=1", None, True, "/sandboxes", "get", 200),
        ("GET", "/sandboxes?status=failed", None, True, "/sandboxes", "get", 200),
        ("GET", "/sandboxes?metadata.openapi_check=none", None, True, "/sandboxes", "get", 200),
        ("GET", "/sandboxes?limit=0", None, True, "/sandboxes", "get", 400),
        ("GET", "/sandboxes?limit=101", None, True, "/sandboxes", "get", 400),
        ("GET", "/sandboxes?page=0", None, True, "/sandboxes", "get", 400),
        ("GET", "/sandboxes?status=bogus", None, True, "/sandboxes", "get", 400),
        ("GET", "/sandboxes", None, False, "/sandboxes", "get", 401),
        ("GET", "/sandboxes/nothex", None, True, "/sandboxes/{id}", "get", 400),
        ("DELETE", "/sandboxes/nothex", None, True, "/sandboxes/{id}", "delete", 400),
        ("POST", "/sandboxes", "[1]", True, "/sandboxes", "post", 400),
        ("POST", "/sandboxes", '{"specs":{"memory":"x"}}', True, "/sandboxes", "post", 400),
        ("POST", "/sandboxes", '{"template":"no-such-template"}', True, "/sandboxes", "post", 400),
        ("POST", "/sandboxes", '{"destroyTimeout":"2h","autoDestroy":true}', True, "/sandboxes", "post", 400),
        ("POST", "/sandboxes", '{"specs":{"memory":999999}}', True, "/sandboxes", "post", None),
        ("GET", "/sandbox/templates", None, False, "/sandbox/templates", "get", 401),
        ("GET", "/sandboxes/regions", None, False, "/sandboxes/regions", "get", 401),
        ("GET", "/sandboxes/" + rand_id(), None, False, "/sandboxes/{id}", "get", 401),
        ("POST", "/sandboxes/%s/exec" % rand_id(), '{"cmd":"true"}', False, "/sandboxes/{id}/exec", "post", 401),
    ]
    for meth, uri, body, auth, path, m, want in cases:
        r = cl.req(meth, uri, body=body, auth=auth)
        errs = check_response(spec, op_of(doc, path, m), r, "%s %s" % (meth, uri))
        if want is not None and r.status != want:
            errs.insert(0, "status %d, expected %d" % (r.status, want))
        t.ok(not errs, "%s %s%s: %d, documented and valid" % (meth, uri, "" if auth else " (no key)", r.status),
             "\n".join(errs) + "\n" + r.show())
    r = cl.req("GET", "/sandboxes", auth=False)
    t.ok(r.status == 401 and isinstance(r.json, dict) and r.json.get("message") == "Missing API key",
         "no key: 401 Missing API key", r.show())
    r = cl.req("GET", "/sandboxes", auth=False, headers=["x-api-key: sbx_" + "0" * 64])
    t.ok(r.status == 401 and isinstance(r.json, dict) and r.json.get("message") == "Invalid API key",
         "unknown key: 401 Invalid API key", r.show())
    probs = []
    for h in ("Authorization: Bearer " + cl.key, "x-api-key: " + cl.key, "x-brimble-key: " + cl.key):
        r = cl.req("GET", "/sandbox/templates", auth=False, headers=[h])
        if r.status != 200:
            probs.append("%s: %s" % (h.split(":")[0], r.show()))
    t.ok(not probs, "each of the three documented key headers is accepted", "\n".join(probs))
    r = cl.req("GET", "/no/such/path")
    t.ok(is_not_found(r) and not spec.validate(r.json, {"$ref": "#/components/schemas/Error"}),
         "unknown path: 404 Not found in the Error shape", r.show())
    r = cl.req("GET", "/sandbox/templates", headers=["X-Request-Id: openapi-check.1"])
    t.ok(r.headers.get("x-request-id") == "openapi-check.1", "the documented X-Request-Id is echoed", r.show())


def check_created(t, spec, cl):
    """(c) a created sandbox record, as POST, the list and GET show it."""
    doc = spec.doc
    sb = spec.deref({"$ref": "#/components/schemas/Sandbox"})
    fields = set(sb["properties"])
    tok = rand_id()
    name = "openapi-check-" + tok[:8]
    env_id = rand_id()
    body = json.dumps({"name": name, "metadata": {"openapi_check": tok}, "env": {"OPENAPI_CHECK": "1"},
                       "environmentId": env_id, "snapshotMode": "manual"})
    r = cl.req("POST", "/sandboxes", body=body, timeout=120)
    errs = check_response(spec, op_of(doc, "/sandboxes", "post"), r, "POST /sandboxes")
    t.ok(r.status in (201, 503) and not errs,
         "POST /sandboxes (valid body): %d, documented and valid" % r.status, "\n".join(errs) + "\n" + r.show())
    created = r
    r = cl.req("GET", "/sandboxes?metadata.openapi_check=" + tok)
    errs = check_response(spec, op_of(doc, "/sandboxes", "get"), r, "list")
    items = r.json["data"]["data"] if not errs and r.status == 200 else []
    t.ok(not errs and len(items) == 1 and items[0].get("name") == name,
         "the new record is listed (metadata filter) and the list validates", "\n".join(errs) + "\n" + r.show())
    if len(items) != 1:
        for _ in range(6):
            t.skip("the created record", "the record was not found in the list")
        return
    sid = items[0]["id"]
    r = cl.req("GET", "/sandboxes/" + sid)
    errs = check_response(spec, op_of(doc, "/sandboxes/{id}", "get"), r, "GET /sandboxes/{id}")
    t.ok(r.status == 200 and not errs, "GET /sandboxes/{id}: 200 and the Sandbox schema validates",
         "\n".join(errs) + "\n" + r.show())
    s = r.json.get("data") if isinstance(r.json, dict) else None
    s = s if isinstance(s, dict) else {}
    t.ok(set(s) == fields and set(items[0]) == fields,
         "the record has every field of the Sandbox schema and no other (%d fields)" % len(fields),
         "missing: %s\nundocumented: %s" % (sorted(fields - set(s)), sorted(set(s) - fields)))
    if created.status == 503:
        want_status = "failed"
        fr_ok = isinstance(s.get("failure_reason"), str) and s.get("failure_reason")
    else:
        want_status = "ready"
        fr_ok = s.get("failure_reason") is None
    probs = []
    regions = cl.req("GET", "/sandboxes/regions")
    region = (regions.json or {}).get("data", {}).get("regions", [None])[0] if regions.json_ok else None
    checks = {"id": sid, "name": name, "status": want_status, "metadata": {"openapi_check": tok},
              "env": ["OPENAPI_CHECK"], "destroyed_at": None, "destroy_reason": None,
              "project_environment": env_id, "snapshot_mode": "manual", "region": region}
    for k, v in checks.items():
        if s.get(k) != v:
            probs.append("%s: %r, expected %r" % (k, s.get(k), v))
    if created.status == 201 and isinstance(created.json, dict) and created.json.get("data") != s:
        probs.append("the 201 answer differs from GET")
    t.ok(not probs and fr_ok, "the record says what was asked (%s%s; region object, environmentId echoed, manual "
         "snapshots)" % (want_status, ", with failure_reason" if want_status == "failed" else ""),
         "\n".join(probs) + "\n" + r.show())
    if created.status == 201:
        check_runtime(t, spec, cl, sid)
    else:
        t.skip("the runtime routes on a ready sandbox", "the create failed (503)")
    u = cl.req("GET", "/usage")
    errs = check_response(spec, op_of(doc, "/usage", "get"), u, "GET /usage")
    counted = u.json_ok and isinstance(u.json.get("data"), dict) and \
        u.json["data"].get("sandboxes", {}).get("count", 0) >= 1
    t.ok(u.status == 200 and not errs and counted,
         "GET /usage: 200, the Usage schema validates, and counts the sandbox made here", "\n".join(errs) + "\n" + u.show())
    u = cl.req("GET", "/usage?from=yesterday")
    errs = check_response(spec, op_of(doc, "/usage", "get"), u, "GET /usage?from=yesterday")
    t.ok(u.status == 400 and not errs, "GET /usage?from=yesterday: 400, documented", "\n".join(errs) + "\n" + u.show())
    del_op = op_of(doc, "/sandboxes/{id}", "delete")
    d1 = cl.req("DELETE", "/sandboxes/" + sid)
    d2 = cl.req("DELETE", "/sandboxes/" + sid)
    errs = check_response(spec, del_op, d1, "DELETE") + check_response(spec, del_op, d2, "DELETE again")
    t.ok(d1.status == 204 and d2.status == 204 and not errs,
         "DELETE a %s sandbox: 204, again 204" % want_status,
         "\n".join(errs) + "\n" + d1.show() + "\n" + d2.show())
    r = cl.req("GET", "/sandboxes/" + sid)
    errs = check_response(spec, op_of(doc, "/sandboxes/{id}", "get"), r, "GET after DELETE")
    s = r.json.get("data") if isinstance(r.json, dict) and isinstance(r.json.get("data"), dict) else {}
    t.ok(not errs and s.get("status") == "destroyed" and s.get("destroy_reason") == "user"
         and isinstance(s.get("destroyed_at"), str),
         "after DELETE: destroyed, destroy_reason user, destroyed_at set, still valid", "\n".join(errs) + "\n" + r.show())
    r = cl.req("DELETE", "/sandboxes/" + rand_id())
    errs = check_response(spec, del_op, r, "DELETE unknown")
    t.ok(r.status == 404 and not errs and r.json.get("message") == "Sandbox not found",
         "DELETE an unknown id: 404 Sandbox not found", "\n".join(errs) + "\n" + r.show())


def frames(r):
    """The JSON frames of an SSE or NDJSON answer, or None when one is not JSON."""
    out = []
    if r.ctype() == "text/event-stream":
        lines = [x[5:].strip() for x in r.body.split("\n") if x.startswith("data:")]
    else:
        lines = [x for x in r.body.split("\n") if x.strip()]
    for x in lines:
        try:
            out.append(json.loads(x))
        except ValueError:
            return None
    return out


def check_frames(spec, r, label):
    fr = frames(r)
    if fr is None or not fr:
        return ["%s: no JSON frames in %r" % (label, r.body[:200])]
    errs = []
    for i, f in enumerate(fr):
        errs += ["%s frame %d: %s" % (label, i, e) for e in spec.validate(f, {"$ref": "#/components/schemas/ExecFrame"})]
    if fr[-1].get("type") not in ("done", "error") or sum(f.get("type") in ("done", "error") for f in fr) != 1:
        errs.append("%s: the last frame, and only it, must be done or error: %r" % (label, fr))
    return errs


def check_runtime(t, spec, cl, sid):
    """(d) every implemented runtime route answers a real request with a documented, valid body."""
    doc = spec.doc
    base = "/sandboxes/" + sid
    octet = "application/octet-stream"

    def one(meth, uri, path, m, want, body=None, ctype="application/json", headers=(), params=(), extra=None,
            what=None):
        r = cl.req(meth, base + uri, body=body, ctype=ctype, headers=headers, params=params, timeout=120)
        errs = check_response(spec, op_of(doc, path, m), r, "%s %s" % (meth, uri))
        if r.status != want:
            errs.insert(0, "status %d, expected %d" % (r.status, want))
        if not errs and extra:
            errs += extra(r)
        t.ok(not errs, "%s %s: %d, documented and valid%s" % (meth, uri, r.status, (" (%s)" % what) if what else ""),
             "\n".join(errs) + "\n" + r.show())
        return r

    def data_is(**want):
        def f(r):
            d = r.json.get("data") if isinstance(r.json, dict) else None
            return ["data.%s: %r, expected %r" % (k, (d or {}).get(k), v) for k, v in want.items()
                    if not isinstance(d, dict) or d.get(k) != v]
        return f

    one("GET", "/wait?timeout=1", "/sandboxes/{id}/wait", "get", 200, extra=data_is(status="ready"))
    one("POST", "/exec", "/sandboxes/{id}/exec", "post", 200, body='{"cmd":"printf hi; printf oops >&2"}',
        extra=data_is(stdout="hi", stderr="oops", exit_code=0), what="JSON answer")
    one("POST", "/exec", "/sandboxes/{id}/exec", "post", 200, body='{"cmd":"printf \'\\\\377\'"}',
        extra=data_is(stdout="/w==", stdout_encoding="base64"), what="output that is not UTF-8: stdout_encoding")
    one("POST", "/exec", "/sandboxes/{id}/exec", "post", 200, body='{"cmd":"echo a; echo b >&2","stream":true}',
        extra=lambda r: check_frames(spec, r, "SSE"), what="text/event-stream frames")
    one("POST", "/exec", "/sandboxes/{id}/exec", "post", 200, body='{"cmd":"echo a","stream":true}',
        headers=["Accept: application/x-ndjson"], extra=lambda r: check_frames(spec, r, "NDJSON"),
        what="application/x-ndjson frames")
    one("POST", "/code", "/sandboxes/{id}/code", "post", 200, body='{"language":"python","code":"print(6*7)"}',
        extra=data_is(stdout="42\n", exit_code=0))
    one("PUT", "/files/tmp/openapi-check.txt", "/sandboxes/{id}/files/{path}", "put", 204, body="hello\n",
        ctype=octet, what="with Content-Length")
    one("PUT", "/files/tmp/openapi-check-chunked.txt", "/sandboxes/{id}/files/{path}", "put", 204, body="chunked\n",
        ctype=octet, params=["CONTENT_LENGTH"], what="without Content-Length, as a chunked body arrives")
    one("GET", "/files/tmp/openapi-check-chunked.txt", "/sandboxes/{id}/files/{path}", "get", 200,
        extra=lambda r: [] if r.body == "chunked\n" else ["body %r" % r.body[:100]])
    one("GET", "/files/tmp?list=1", "/sandboxes/{id}/files/{path}", "get", 200, what="list")
    one("POST", "/files/batch", "/sandboxes/{id}/files/batch", "post", 200,
        body='{"files":[{"path":"tmp/openapi-check-b64","content_base64":"aGk="},'
             '{"path":"/no-such-dir/x","content_base64":"aGk="}]}',
        extra=data_is(uploaded=1, failed=1, results=[
            {"path": "/tmp/openapi-check-b64", "bytes": 2, "success": True},
            {"path": "/no-such-dir/x", "bytes": 2, "success": False,
             "error": "Destination directory does not exist: /no-such-dir"}]),
        what="content_base64, one good file and one bad")
    one("DELETE", "/files/tmp/openapi-check.txt", "/sandboxes/{id}/files/{path}", "delete", 204)
    one("GET", "/stats", "/sandboxes/{id}/stats", "get", 200,
        extra=lambda r: [] if r.json["data"].get("current") else ["no current"], what="with the extension current")
    one("GET", "/stats?hoursAgo=0", "/sandboxes/{id}/stats", "get", 400)
    r = one("POST", "/exec", "/sandboxes/{id}/exec", "post", 200, body='{"cmd":"cat","background":true}',
            what="background")
    pid = (r.json or {}).get("data", {}).get("pid") if r.json_ok and isinstance(r.json.get("data"), dict) else None
    if not isinstance(pid, int):
        t.skip("background process routes", "no pid")
        return
    one("GET", "/processes", "/sandboxes/{id}/processes", "get", 200)
    one("GET", "/processes/%d" % pid, "/sandboxes/{id}/processes/{pid}", "get", 200, extra=data_is(pid=pid))
    one("POST", "/processes/%d/stdin?close=1" % pid, "/sandboxes/{id}/processes/{pid}/stdin", "post", 204,
        body="echoed\n", ctype=octet)
    one("GET", "/processes/%d/output?follow=1" % pid, "/sandboxes/{id}/processes/{pid}/output", "get", 200,
        extra=lambda r: check_frames(spec, r, "output"), what="replayed and followed to the end")
    r = one("POST", "/exec", "/sandboxes/{id}/exec", "post", 200,
            body='{"cmd":"sleep 60","background":true,"pty":{"cols":100,"rows":30}}', what="background on a pty")
    pid = (r.json or {}).get("data", {}).get("pid") if r.json_ok and isinstance(r.json.get("data"), dict) else None
    one("POST", "/processes/%s/resize" % pid, "/sandboxes/{id}/processes/{pid}/resize", "post", 200,
        body='{"cols":120,"rows":40}', extra=data_is(pid=pid, cols=120, rows=40))
    one("POST", "/processes/%s/signal" % pid, "/sandboxes/{id}/processes/{pid}/signal", "post", 200,
        body='{"signal":"SIGKILL"}', extra=data_is(pid=pid, signal=9))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--router-h", required=True)
    ap.add_argument("--router-c", required=True)
    ap.add_argument("--fcgi", required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--no-create", action="store_true", help="skip part (c), which writes a record")
    args = ap.parse_args()

    t = Tap()
    try:
        with open(args.spec) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        t.ok(False, "openapi.json parses as JSON", str(e))
        return t.done()
    t.ok(True, "openapi.json parses as JSON")
    spec = Spec(doc)
    cl = Client(args.fcgi, args.socket, args.key)
    check_document(t, spec)
    check_router_lists(t, spec, args)
    check_routing(t, spec, cl)
    check_other_methods(t, spec, cl)
    check_neighbours(t, cl)
    check_answers(t, spec, cl)
    if not args.no_create:
        check_created(t, spec, cl)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())

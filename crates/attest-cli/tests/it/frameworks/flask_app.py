"""A Flask app as such apps are written: Werkzeug parses the query string, forms and
multipart bodies, `request.get_json()` reads JSON in UTF-8, -16 or -32 (a byte-order mark
too); a method override from the `X-HTTP-Method-Override` header or a `_method` query or
form field (the method-rewrite middleware pattern); a GraphQL view reading `query` where
Flask GraphQL views do (JSON, form, multipart `operations`, the query string,
`application/graphql`). It executes nothing: each answer says, in `X-Executed`, whether the
request would have run a delete (an effective DELETE, or a mutation root field that
deletes, as graphql-core parses it)."""

import json
import re
import sys

from flask import Flask, jsonify, request
from graphql import parse

app = Flask(__name__)
DELETES = re.compile("delete|remove|destroy", re.IGNORECASE)
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def effective_method():
    method = request.method
    override = (
        request.headers.get("X-HTTP-Method-Override")
        or request.args.get("_method")
        or (request.form.get("_method") if method == "POST" else None)
    )
    return override.upper() if override else method


def documents():
    found = []
    body = request.get_json(silent=True, force=request.mimetype.endswith("json"))
    for one in body if isinstance(body, list) else [body]:
        if isinstance(one, dict) and isinstance(one.get("query"), str):
            found.append(one["query"])
    if "query" in request.form:
        found.append(request.form["query"])
    if "operations" in request.form:
        try:
            operations = json.loads(request.form["operations"])
        except ValueError:
            operations = None
        for one in operations if isinstance(operations, list) else [operations]:
            if isinstance(one, dict) and isinstance(one.get("query"), str):
                found.append(one["query"])
    if "query" in request.args:
        found.append(request.args["query"])
    if request.mimetype == "application/graphql":
        found.append(request.get_data(as_text=True))
    return found


def deletes(document):
    try:
        tree = parse(document)
    except Exception:
        return False
    return any(
        getattr(d, "operation", None) is not None
        and d.operation.value == "mutation"
        and any(DELETES.search(s.name.value) for s in d.selection_set.selections if hasattr(s, "name"))
        for d in tree.definitions
    )


@app.route("/", defaults={"path": ""}, methods=METHODS)
@app.route("/<path:path>", methods=METHODS)
def everything(path):
    executed = effective_method() == "DELETE" or any(deletes(d) for d in documents())
    response = jsonify(ok=True, id="n1")
    response.headers["X-Executed"] = "delete" if executed else "other"
    return response


if __name__ == "__main__":
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    print(f"listening {server.server_port}", flush=True)
    sys.stdout.flush()
    server.serve_forever()

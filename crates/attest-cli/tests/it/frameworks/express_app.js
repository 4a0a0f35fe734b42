// An Express app as such apps are written: body-parser (JSON, forms, application/graphql
// text; gzip and deflate bodies inflated), method-override (the three override headers, a
// `_method` body field, `?_method=`), and a GraphQL endpoint reading `query` where
// express-graphql and graphql-http read it. It executes nothing: each answer says, in
// `X-Executed`, whether the request would have run a delete (an effective DELETE method, or
// a mutation root field that deletes, as graphql-js parses it).
const express = require("express");
const bodyParser = require("body-parser");
const methodOverride = require("method-override");
const { parse } = require("graphql");

const app = express();
app.use(bodyParser.json({ type: ["application/json", "application/*+json"], strict: false }));
app.use(bodyParser.urlencoded({ extended: false }));
app.use(bodyParser.text({ type: "application/graphql" }));
for (const header of ["X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"]) {
  app.use(methodOverride(header));
}
app.use(
  methodOverride((req) =>
    req.body && typeof req.body === "object" && !Array.isArray(req.body) ? req.body._method : undefined
  )
);
app.use(methodOverride("_method"));

const DELETES = /delete|remove|destroy/i;

function documents(req) {
  const found = [];
  const body = req.body;
  if (typeof body === "string") found.push(body);
  for (const request of Array.isArray(body) ? body : [body]) {
    if (request && typeof request === "object" && typeof request.query === "string") found.push(request.query);
  }
  if (typeof req.query.query === "string") found.push(req.query.query);
  return found;
}

function deletes(document) {
  try {
    return parse(document).definitions.some(
      (d) =>
        d.kind === "OperationDefinition" &&
        d.operation === "mutation" &&
        d.selectionSet.selections.some((s) => s.kind === "Field" && DELETES.test(s.name.value))
    );
  } catch {
    return false;
  }
}

app.all("*", (req, res) => {
  const executed = req.method === "DELETE" || documents(req).some(deletes) ? "delete" : "other";
  res.set("X-Executed", executed).json({ ok: true, id: "n1" });
});
// A body no parser could read is refused, as these apps refuse it: nothing ran.
app.use((err, req, res, next) => res.status(400).set("X-Executed", "nothing").json({ error: String(err) }));

const server = app.listen(0, "127.0.0.1", () => console.log(`listening ${server.address().port}`));

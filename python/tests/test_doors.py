"""The doors scenario (crates/attest-cli/tests/it/doors.rs), through the Python doors:
the decorator, a LangChain tool, an OpenAI Agents tool, a Claude Agent SDK tool and a
CrewAI tool, each with the same `.attest/config.yaml` and nothing else:

- the registry maps the in-house tool `frobnicate_widget` to `acmecrm.list`: it acts;
- `create_deal` is read back by the configuration's recipe from the fake CRM on
  127.0.0.1 (its base URL and credential variable from the file): `verified` when the
  CRM keeps what it was sent, `unverified` when it lies;
- `search_widgets` is blocked organisation-wide: refused, and the CRM never sees it;
- `delete_deal` asks: the configuration's webhook is told.
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

import pytest

import attest

ACME_TOKEN = "acme-test-token"
HOOK_SECRET = "whsec-doors"


class Crm:
    """The fake CRM of the Rust scenario: widgets, a search, deals read back with the
    bearer token; a lying CRM stores stage `lost` while answering with the stage sent.
    `seen` lists every request; `hooks` every webhook body."""

    def __init__(self, lying: bool) -> None:
        self.lying, self.deals, self.seen, self.hooks = lying, [], [], []
        crm = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, body: object = None) -> None:
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                path = self.path.split("?")[0]
                crm.seen.append(f"GET {path}")
                if path == "/v1/widgets":
                    return self._send(200, [{"id": "w1", "kind": "sprocket"}])
                if path == "/v1/widgets/search":
                    return self._send(200, [])
                if path.startswith("/v1/deals/"):
                    if self.headers.get("authorization") != f"Bearer {ACME_TOKEN}":
                        return self._send(401, {"error": "no"})
                    deal = next((d for d in crm.deals if d["id"] == path.rsplit("/", 1)[1]), None)
                    return self._send(200, deal) if deal else self._send(404, {"error": "not found"})
                self._send(404, {"error": "not found"})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                if self.path == "/hook":
                    crm.hooks.append(body)
                    return self._send(200, {"ok": True})
                crm.seen.append(f"POST {self.path}")
                answered = {"id": f"d{len(crm.deals) + 1}", "name": body.get("name"), "stage": body.get("stage")}
                crm.deals.append(dict(answered, stage="lost") if crm.lying else dict(answered))
                self._send(201, answered)

            def do_DELETE(self) -> None:  # noqa: N802
                crm.seen.append(f"DELETE {self.path}")
                self._send(204)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        """What the in-house tools do: the CRM's REST API with the token."""
        request = urllib.request.Request(
            self.url + path, method=method, data=None if body is None else json.dumps(body).encode(),
            headers={"authorization": f"Bearer {ACME_TOKEN}", "content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            text = answer.read()
        return json.loads(text) if text else {}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def write_configuration(directory, crm: Crm) -> None:
    """The Rust scenario's `.attest/config.yaml`, registry, policy and recipe."""
    folder = directory / ".attest"
    (folder / "recipes").mkdir(parents=True)
    (folder / "config.yaml").write_text(
        f"""ledger: ledger.sqlite
policy: policy.yaml
registry: [in-house.yaml]
recipes: [recipes]
systems:
  acmecrm: {{base_url: '{crm.url}', credential: ACME_TOKEN}}
notify:
  webhook: {{url: '{crm.url}/hook', secret_env: HOOK_SECRET}}
"""
    )
    (folder / "in-house.yaml").write_text(
        """overrides:
  - {tool: frobnicate_widget, system: acmecrm, verb: list}
  - {tool: search_widgets, system: acmecrm, verb: search}
"""
    )
    (folder / "policy.yaml").write_text(
        """version: 1
org:
  blocked: [acmecrm.search]
policies:
  - name: deals
    match: {system: acmecrm, verb: create}
    decision: act
    reason: deals are made by the sales agent
"""
    )
    (folder / "recipes" / "acmecrm.yaml").write_text(
        """recipes:
  - name: acmecrm.deal
    system: acmecrm
    verbs: [create]
    when: {params: [/stage], result: [/id]}
    base_url: http://127.0.0.1:9
    auth: {env: ACME_DEFAULT_TOKEN}
    read:
      url: "{base}/v1/deals/{id}"
      id: [result:/id]
    compare:
      fields:
        - {name: stage, want: params:/stage, got: /stage}
"""
    )


@pytest.fixture(params=[False, True], ids=["honest", "lying"])
def scenario(request, tmp_path, monkeypatch):
    crm = Crm(lying=request.param)
    write_configuration(tmp_path, crm)
    monkeypatch.chdir(tmp_path)
    # The only environment a door gets: the CRM's token and the webhook's secret.
    monkeypatch.setenv("ACME_TOKEN", ACME_TOKEN)
    monkeypatch.setenv("HOOK_SECRET", HOOK_SECRET)
    for name in ("ATTEST_LEDGER", "ATTEST_POLICY", "ATTEST_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    yield crm
    crm.close()


def rows(directory) -> list[dict]:
    """The ledger's rows, through the binary, as the Rust scenario reads them."""
    import subprocess

    from conftest import attest_binary

    out = subprocess.run(
        [attest_binary(), "export"], cwd=directory, capture_output=True, text=True, timeout=120, check=True
    )
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def outcome(directory, verb: str) -> dict:
    return [r for r in rows(directory) if r["verb"] == verb and r["execution"]["status"] != "intent"][-1]


def check(crm: Crm, door: str, directory) -> None:
    """The promises every door keeps (the Rust scenario's `check`)."""
    listed = outcome(directory, "list")
    assert (f"{listed['system']}.{listed['verb']}", listed["decision"]) == ("acmecrm.list", "act"), door
    created = outcome(directory, "create")
    want = "unverified" if crm.lying else "verified"
    assert created["verification"]["level"] == want, f"{door}: {created}"
    assert created["verification"]["method"] == "read-back:recipe", f"{door}: {created}"
    assert ACME_TOKEN not in json.dumps(created)
    assert outcome(directory, "search")["decision"] == "refuse", door
    assert "GET /v1/widgets/search" not in crm.seen, f"{door}: the blocked read reached the CRM"
    assert "DELETE /v1/deals/d1" not in crm.seen, f"{door}: the asked delete ran"
    assert any(
        h.get("type") == "approval.requested" and h["request"].get("system") == "acmecrm" for h in crm.hooks
    ), f"{door}: the webhook was not told of the ask: {crm.hooks}"


# The in-house tools, as each framework would hold them.
def functions(crm: Crm) -> dict[str, Callable]:
    def frobnicate_widget(kind: str = "all") -> dict:
        """List the widgets."""
        return {"widgets": crm.call("GET", "/v1/widgets")}

    def search_widgets(q: str) -> dict:
        """Search the widgets."""
        return {"widgets": crm.call("GET", f"/v1/widgets/search?q={q}")}

    def create_deal(name: str, stage: str) -> dict:
        """Create a deal."""
        return crm.call("POST", "/v1/deals", {"name": name, "stage": stage})

    def delete_deal(id: str) -> dict:
        """Delete a deal."""
        return crm.call("DELETE", f"/v1/deals/{id}")

    return {f.__name__: f for f in (frobnicate_widget, search_widgets, create_deal, delete_deal)}


CALLS = [
    ("frobnicate_widget", {}),
    ("create_deal", {"name": "Globex", "stage": "won"}),
    ("search_widgets", {"q": "x"}),
    ("delete_deal", {"id": "d1"}),
]


def test_the_decorator(scenario, tmp_path):
    a = attest.Attest()
    tools = {name: a.tool(fn, system="acmecrm") for name, fn in functions(scenario).items()}
    tools["frobnicate_widget"]()
    assert tools["create_deal"](name="Globex", stage="won")["id"] == "d1"
    with pytest.raises(attest.Refused):
        tools["search_widgets"](q="x")
    with pytest.raises(attest.Held):
        tools["delete_deal"](id="d1")
    check(scenario, "decorator", tmp_path)


def test_a_langchain_tool(scenario, tmp_path):
    import attest.langchain
    from langchain_core.tools import tool

    a = attest.Attest()
    wrapped = {n: attest.langchain.wrap_tool(tool(f), a, system="acmecrm") for n, f in functions(scenario).items()}
    for name, arguments in CALLS:
        wrapped[name].invoke(arguments)
    check(scenario, "LangChain tool", tmp_path)


def test_an_openai_agents_tool(scenario, tmp_path):
    import attest.openai_agents
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.testing.model import ScriptedModel, assistant_message, function_call

    set_tracing_disabled(True)
    a = attest.Attest()
    tools = [attest.openai_agents.wrap_tool(function_tool(f), a, system="acmecrm") for f in functions(scenario).values()]
    for number, (name, arguments) in enumerate(CALLS):
        model = ScriptedModel([[function_call(name, arguments, call_id=f"call_{number}")], [assistant_message("done")]])
        result = asyncio.run(Runner.run(Agent(name="sales", model=model, tools=tools), "go"))
        assert (result.final_output == "done") != bool(result.interruptions), name
    check(scenario, "OpenAI Agents tool", tmp_path)


def test_a_claude_agent_sdk_tool(scenario, tmp_path):
    import attest.claude_agent_sdk
    from claude_agent_sdk import ToolPermissionContext

    a = attest.Attest()
    hooks = attest.claude_agent_sdk.AttestHooks(a)
    in_house = functions(scenario)

    async def play() -> None:
        for number, (name, arguments) in enumerate(CALLS):
            use_id = f"toolu_{number}"
            # An in-process SDK MCP server named `acmecrm` serves the in-house tools.
            context = ToolPermissionContext(tool_use_id=use_id)
            answer = await hooks.can_use_tool(f"mcp__acmecrm__{name}", arguments, context)
            if answer.behavior == "allow":
                response = in_house[name](**arguments)
                await hooks.post({"tool_name": f"mcp__acmecrm__{name}", "tool_response": response}, use_id, None)

    asyncio.run(play())
    check(scenario, "Claude Agent SDK tool", tmp_path)

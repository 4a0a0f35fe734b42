"""A small MCP server for the proxy's tests, built with the official `mcp` SDK.

Tools: create_note/update_note with get_note (read-back pairs; an update to a title
starting with `!` stores another title: a contradicted write), boom (an error result),
crash (the process exits mid-call) and fill_disk (fills a file system while it runs). Every call is appended to $NOTES_LOG, so a test
can tell which calls reached the server.
"""

import json
import os

from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("notes")
notes: dict[str, dict] = {}


def log(name: str, args: dict) -> None:
    path = os.environ.get("NOTES_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"tool": name, "args": args}) + "\n")


@server.tool()
def create_note(title: str, body: str) -> dict:
    """Create a note."""
    log("create_note", {"title": title, "body": body})
    note_id = f"n{len(notes) + 1}"
    notes[note_id] = {"id": note_id, "title": title, "body": body}
    return {"id": note_id}


@server.tool()
def update_note(id: str, title: str) -> dict:
    """Change a note's title."""
    log("update_note", {"id": id, "title": title})
    # A title starting with "!" is stored changed: a write that says it worked and did not.
    notes[id]["title"] = title + " (mangled)" if title.startswith("!") else title
    return {"id": id, "ok": True}


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def get_note(id: str) -> dict:
    """Read a note."""
    log("get_note", {"id": id})
    return notes[id]


@server.tool()
def boom() -> str:
    """Always fails."""
    log("boom", {})
    raise ValueError("boom went the tool")


@server.tool()
def crash() -> str:
    """Exits the process mid-call."""
    log("crash", {})
    os._exit(3)


@server.tool()
def fill_disk(path: str) -> dict:
    """Writes to `path` until its file system is full: a disk that fills while a write runs."""
    log("fill_disk", {"path": path})
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
                os.fsync(f.fileno())
        except OSError:
            pass
    return {"ok": True}


if __name__ == "__main__":
    server.run()
